"""GET /api/health: the lake this server reads, its table sizes and tags."""

from __future__ import annotations

from fastapi import APIRouter

from episodelake.api.deps import LakeDep, PersonDep
from episodelake.api.models import Health

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health)
def health(lake: LakeDep, user: PersonDep) -> Health:
    """`lake` is the lake's name; `location` (where it lives: a folder or a URI) only for an
    admin, or on a server that needs no token, since a path tells others about the machine."""
    counts = {t: lake.dataset(t).count_rows() for t in ("episodes", "steps", "sets")}
    location = str(lake.path)
    return Health(ok=True, lake=lake.location.name, tables=counts, tags=sorted(lake.tags()),
                  location=location if user is None or user.may("admin") else None)
