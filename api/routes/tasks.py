"""GET /api/tasks: the task tree's top level, with counts and success rates under a filter."""

from __future__ import annotations

from fastapi import APIRouter

from episodelake.api.deps import FilterDep, LakeDep, SettingsDep
from episodelake.api.listing import where_clause
from episodelake.api.models import TaskNode

router = APIRouter(tags=["tasks"])


@router.get("/tasks", response_model=list[TaskNode])
def tasks(lake: LakeDep, settings: SettingsDep, filt: FilterDep) -> list[dict]:
    """One node per task; expand a task with GET /api/episodes?task=<task_name>."""
    where, params = where_clause(lake, filt, timeout_s=settings.sql_timeout_s)
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
