"""GET /api/tasks: the task tree's top level, with counts and success rates under a filter."""

from __future__ import annotations

from fastapi import APIRouter

from episodelake.api.deps import FilterDep, LakeDep, SettingsDep
from episodelake.api.listing import where_clause
from episodelake.api.models import TaskNode
from episodelake.lake.ops.episode_stats import task_summaries

router = APIRouter(tags=["tasks"])


@router.get("/tasks", response_model=list[TaskNode])
def tasks(lake: LakeDep, settings: SettingsDep, filt: FilterDep) -> list[dict]:
    """One node per task; expand a task with GET /api/episodes?task=<task_name>."""
    where, params = where_clause(lake, filt, timeout_s=settings.sql_timeout_s)
    return task_summaries(lake, where, params)
