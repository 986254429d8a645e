"""Numbers over the episodes a filter selects, for the task tree and the charts: outcomes per
task, success per run, task and policy version, step-reward and length histograms.

Every function takes `where`, a condition over `episodes e` that the caller built with `?`
for each of its `params` (`api.listing.where_clause`; `TRUE` selects everything), never a
person's text, so one filter narrows the list, the tree and the charts alike."""

from __future__ import annotations

import math

from episodelake.lake.storage.lake import Lake


def task_summaries(lake: Lake, where: str, params: list) -> list[dict]:
    """One row per task of the episodes meeting `where`, by task name: its goal, episodes,
    successes, failures, unjudged ones, success rate and mean length (the task tree's top)."""
    return lake.sql(f"""
        SELECT task_name, any_value(task_goal) AS task_goal, count(*) AS episodes,
               count(*) FILTER (WHERE success) AS successes,
               count(*) FILTER (WHERE NOT success) AS failures,
               count(*) FILTER (WHERE success IS NULL) AS unjudged,
               avg(success::INTEGER) AS success_rate,
               avg(episode_length) AS mean_length
        FROM episodes e WHERE {where}
        GROUP BY task_name ORDER BY task_name NULLS LAST
    """, params).to_pylist()


def success_cells(lake: Lake, where: str, params: list) -> list[dict]:
    """Episodes, judged ones, successes and success rate per (run, task, policy version) of
    the episodes meeting `where`; versions of one run in numeric order where they are numbers."""
    return lake.sql(f"""
        SELECT run_id, task_name, policy_version, count(*) AS episodes, count(success) AS judged,
               count(*) FILTER (WHERE success) AS successes, avg(success::INTEGER) AS success_rate
        FROM episodes e WHERE {where}
        GROUP BY run_id, task_name, policy_version
        ORDER BY run_id NULLS LAST, task_name NULLS LAST, try_cast(policy_version AS DOUBLE) NULLS LAST,
                 policy_version
    """, params).to_pylist()


def _step_rewards(where: str) -> str:
    return f"SELECT s.step_reward AS v FROM steps s JOIN episodes e USING (episode_id) WHERE {where}"


def _lengths(where: str) -> str:
    return f"SELECT e.episode_length AS v FROM episodes e WHERE {where}"


def step_reward_totals(lake: Lake, where: str, params: list) -> dict:
    """How many steps the episodes meeting `where` have, and how many of them carry no step
    reward ({"steps": n, "nulls": n}): a histogram of rewards says nothing of the unjudged."""
    return lake.sql(
        f"SELECT count(*) AS steps, count(*) FILTER (WHERE v IS NULL) AS nulls FROM ({_step_rewards(where)})", params
    ).to_pylist()[0]


def step_reward_histogram(lake: Lake, where: str, params: list, bins: int) -> list[dict]:
    """The step rewards of the episodes meeting `where` in `bins` equal-width bins."""
    return histogram(lake, f"{_step_rewards(where)} AND s.step_reward IS NOT NULL", params, bins)


def length_histogram(lake: Lake, where: str, params: list, bins: int) -> list[dict]:
    """The lengths of the episodes meeting `where`, one bin per length where fewer than `bins`."""
    return histogram(lake, f"{_lengths(where)} AND e.episode_length IS NOT NULL", params, bins, integer=True)


def histogram(lake: Lake, values_sql: str, params: list, bins: int, *, integer: bool = False) -> list[dict]:
    """Equal-width bins ({"lo", "hi", "count"}) over the range of column `v` of `values_sql`
    (a query of our own, its values in `params`); none when it has no value.

    Integer values spanning fewer than `bins` values get one bin per value, so a length
    distribution reads as lengths, not as fractional ranges.
    """
    lo, hi = lake.sql(f"SELECT min(v), max(v) FROM ({values_sql})", params).to_pylist()[0].values()
    if lo is None:
        return []
    lo, hi = float(lo), float(hi)
    if integer and hi - lo + 1 <= bins:
        width, bins = 1.0, int(hi - lo) + 1
    elif integer:
        width = float(math.ceil((hi - lo + 1) / bins))
        bins = int(math.ceil((hi - lo + 1) / width))
    else:
        width = (hi - lo) / bins if hi > lo else 1.0
    rows = lake.sql(
        f"SELECT least(floor((v - ?) / ?)::BIGINT, ?) AS b, count(*) AS n FROM ({values_sql}) GROUP BY b",
        [lo, width, bins - 1, *params],
    ).to_pylist()
    counts = {r["b"]: r["n"] for r in rows}
    return [{"lo": lo + i * width, "hi": lo + (i + 1) * width, "count": counts.get(i, 0)} for i in range(bins)]
