"""GET /api/stats: success rate per run, task and policy_version (a policy version is a version
of its run's policy: the same name in two runs is two policies), step-reward and length
histograms."""

from __future__ import annotations

import math

from fastapi import APIRouter

from episodelake.api.deps import FilterDep, LakeDep, SettingsDep
from episodelake.api.listing import where_clause
from episodelake.api.models import Stats
from episodelake.lake.storage.lake import Lake

router = APIRouter(tags=["stats"])

REWARD_BINS = 20
LENGTH_BINS = 40


def histogram(lake: Lake, values_sql: str, params: list, bins: int, *, integer: bool = False) -> list[dict]:
    """Equal-width bins over the range of column `v` of `values_sql`.

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


@router.get("/stats", response_model=Stats)
def stats(lake: LakeDep, settings: SettingsDep, filt: FilterDep) -> dict:
    """Charts' data for the episodes matching the filter (the same filter as the list)."""
    where, params = where_clause(lake, filt, timeout_s=settings.sql_timeout_s)
    cells = lake.sql(f"""
        SELECT run_id, task_name, policy_version, count(*) AS episodes, count(success) AS judged,
               count(*) FILTER (WHERE success) AS successes, avg(success::INTEGER) AS success_rate
        FROM episodes e WHERE {where}
        GROUP BY run_id, task_name, policy_version
        ORDER BY run_id NULLS LAST, task_name NULLS LAST, try_cast(policy_version AS DOUBLE) NULLS LAST,
                 policy_version
    """, params).to_pylist()
    step_rewards = f"SELECT s.step_reward AS v FROM steps s JOIN episodes e USING (episode_id) WHERE {where}"
    totals = lake.sql(
        f"SELECT count(*) AS steps, count(*) FILTER (WHERE v IS NULL) AS nulls FROM ({step_rewards})", params
    ).to_pylist()[0]
    lengths = f"SELECT e.episode_length AS v FROM episodes e WHERE {where}"
    return {
        "episodes": sum(c["episodes"] for c in cells),
        "steps": totals["steps"],
        "success_by_task_policy": cells,
        "step_reward_histogram": histogram(lake, f"{step_rewards} AND s.step_reward IS NOT NULL", params, REWARD_BINS),
        "step_reward_nulls": totals["nulls"],
        "length_histogram": histogram(lake, f"{lengths} AND e.episode_length IS NOT NULL", params, LENGTH_BINS, integer=True),
    }
