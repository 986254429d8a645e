"""GET /api/health: the lake this server reads, its table sizes and tags."""

from __future__ import annotations

from fastapi import APIRouter

from episodelake.api.deps import LakeDep
from episodelake.api.models import Health

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health)
def health(lake: LakeDep) -> Health:
    counts = {t: lake.dataset(t).count_rows() for t in ("episodes", "steps", "sets")}
    return Health(ok=True, lake=str(lake.path), tables=counts, tags=sorted(lake.tags()))
