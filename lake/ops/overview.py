"""The whole lake in a few numbers, for the landing page: how much is stored, how each policy
version of each run does, which collection runs are the latest.

Policy versions of different runs are kept apart: a version names a checkpoint of its run's
policy, so the same name in two runs is two policies."""

from __future__ import annotations

from episodelake.lake.storage.lake import Lake


def lake_counts(lake: Lake) -> dict:
    """How many episodes and steps the lake holds ({"episodes": n, "steps": n}), in one
    query, so both numbers are of one snapshot."""
    return lake.sql("SELECT (SELECT count(*) FROM episodes) AS episodes, (SELECT count(*) FROM steps) AS steps").to_pylist()[0]


def success_by_policy(lake: Lake) -> list[dict]:
    """Episodes, successes and success rate per (run, policy version), by run and then by
    version read as a number where it is one (10 before 9.5 would read as a regression)."""
    return lake.sql("""
        SELECT run_id, policy_version, count(*) AS episodes, count(*) FILTER (WHERE success) AS successes,
               avg(success::INTEGER) AS success_rate
        FROM episodes GROUP BY run_id, policy_version
        ORDER BY run_id NULLS LAST, try_cast(policy_version AS DOUBLE) NULLS LAST, policy_version NULLS LAST
    """).to_pylist()


def latest_runs(lake: Lake, limit: int) -> list[dict]:
    """The `limit` runs that recorded an episode last, newest first: their episodes,
    successes, success rate, policy versions and when their last episode ended."""
    return lake.sql("""
        SELECT run_id, count(*) AS episodes, count(*) FILTER (WHERE success) AS successes,
               avg(success::INTEGER) AS success_rate,
               coalesce(list_sort(list_distinct(list(policy_version) FILTER (WHERE policy_version IS NOT NULL))),
                        []) AS policy_versions,  -- a run none of whose episodes names one
               max(coalesce(finished_at, created_at)) AS last_episode_at
        FROM episodes GROUP BY run_id ORDER BY last_episode_at DESC NULLS LAST, run_id LIMIT ?
    """, [limit]).to_pylist()
