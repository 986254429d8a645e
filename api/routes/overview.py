"""GET /api/overview: the landing page's numbers in one call: success rate per policy version
of each run (versions of different runs kept apart), the latest collection runs, the failure
categories curated most, the sets changed last."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from episodelake.api.deps import LakeDep
from episodelake.api.models import Overview
from episodelake.lake.curation import curation

router = APIRouter(tags=["stats"])

Limit = Annotated[int, Query(ge=1, le=50, description="rows per list")]


@router.get("/overview", response_model=Overview)
def overview(lake: LakeDep, limit: Limit = 6) -> dict:
    """Whole-lake summaries; each list is ordered by what a person looks at first."""
    counts = lake.sql("SELECT (SELECT count(*) FROM episodes) AS episodes, (SELECT count(*) FROM steps) AS steps").to_pylist()[0]
    by_policy = lake.sql("""
        SELECT run_id, policy_version, count(*) AS episodes, count(*) FILTER (WHERE success) AS successes,
               avg(success::INTEGER) AS success_rate
        FROM episodes GROUP BY run_id, policy_version
        ORDER BY run_id NULLS LAST, try_cast(policy_version AS DOUBLE) NULLS LAST, policy_version NULLS LAST
    """).to_pylist()
    runs = lake.sql("""
        SELECT run_id, count(*) AS episodes, count(*) FILTER (WHERE success) AS successes,
               avg(success::INTEGER) AS success_rate,
               coalesce(list_sort(list_distinct(list(policy_version) FILTER (WHERE policy_version IS NOT NULL))),
                        []) AS policy_versions,  -- a run none of whose episodes names one
               max(coalesce(finished_at, created_at)) AS last_episode_at
        FROM episodes GROUP BY run_id ORDER BY last_episode_at DESC NULLS LAST, run_id LIMIT ?
    """, [limit]).to_pylist()
    categories = lake.sql("""
        SELECT m.failure_category, count(*) AS members, count(DISTINCT m.set_id) AS sets
        FROM set_members m JOIN sets s USING (set_id)
        WHERE NOT coalesce(m.removed, false) AND NOT coalesce(s.deleted, false)
        GROUP BY m.failure_category ORDER BY members DESC, m.failure_category NULLS LAST LIMIT ?
    """, [limit]).to_pylist()
    recent = sorted(curation.list_sets(lake), key=lambda s: s["updated_at"] or s["created_at"], reverse=True)
    return {**counts, "success_by_policy": by_policy, "latest_runs": runs, "failure_categories": categories,
            "recent_sets": recent[:limit]}
