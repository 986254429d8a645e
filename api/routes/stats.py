"""GET /api/stats: success rate per run, task and policy_version (a policy version is a version
of its run's policy: the same name in two runs is two policies), step-reward and length
histograms."""

from __future__ import annotations

from fastapi import APIRouter

from episodelake.api.deps import FilterDep, LakeDep, SettingsDep
from episodelake.api.listing import where_clause
from episodelake.api.models import Stats
from episodelake.lake.ops import episode_stats

router = APIRouter(tags=["stats"])

REWARD_BINS = 20
LENGTH_BINS = 40


@router.get("/stats", response_model=Stats)
def stats(lake: LakeDep, settings: SettingsDep, filt: FilterDep) -> dict:
    """Charts' data for the episodes matching the filter (the same filter as the list)."""
    where, params = where_clause(lake, filt, timeout_s=settings.sql_timeout_s)
    cells = episode_stats.success_cells(lake, where, params)
    totals = episode_stats.step_reward_totals(lake, where, params)
    return {
        "episodes": sum(c["episodes"] for c in cells),
        "steps": totals["steps"],
        "success_by_task_policy": cells,
        "step_reward_histogram": episode_stats.step_reward_histogram(lake, where, params, REWARD_BINS),
        "step_reward_nulls": totals["nulls"],
        "length_histogram": episode_stats.length_histogram(lake, where, params, LENGTH_BINS),
    }
