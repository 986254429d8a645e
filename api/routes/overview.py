"""GET /api/overview: the landing page's numbers in one call: success rate per policy version
of each run (versions of different runs kept apart), the latest collection runs, the failure
categories curated most, the sets changed last."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from episodelake.api.deps import LakeDep
from episodelake.api.models import Overview
from episodelake.lake.curation import categories, curation
from episodelake.lake.ops import overview as lake_overview

router = APIRouter(tags=["stats"])

Limit = Annotated[int, Query(ge=1, le=50, description="rows per list")]


@router.get("/overview", response_model=Overview)
def overview(lake: LakeDep, limit: Limit = 6) -> dict:
    """Whole-lake summaries; each list is ordered by what a person looks at first."""
    counts = lake_overview.lake_counts(lake)
    by_policy = lake_overview.success_by_policy(lake)
    runs = lake_overview.latest_runs(lake, limit)
    failures = categories.failure_categories(lake, limit)
    recent = sorted(curation.list_sets(lake), key=lambda s: s["updated_at"] or s["created_at"], reverse=True)
    return {**counts, "success_by_policy": by_policy, "latest_runs": runs, "failure_categories": failures,
            "recent_sets": recent[:limit]}
