"""Saved views, named episode filters shared through the lake: /api/views, /api/views/{view_id}
(read, create, replace a view's filters, delete; each change in the audit log)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from episodelake.api.deps import CuratorDep, IdPath, LakeDep
from episodelake.api.models import SavedView, SavedViewCreate, SavedViewUpdate
from episodelake.lake.curation import curation

router = APIRouter(tags=["views"])


@router.get("/views", response_model=list[SavedView])
def list_views(lake: LakeDep) -> list[dict]:
    """Every saved view, by name."""
    return curation.list_views(lake)


@router.post("/views", response_model=SavedView, status_code=201)
def create_view(lake: LakeDep, who: CuratorDep, body: SavedViewCreate) -> dict:
    """Save a filter under a name no other view has (409 names the view that has it)."""
    return curation.create_view(lake, body.name, body.filters.model_dump(mode="json", exclude_defaults=True),
                                who=who)


@router.get("/views/{view_id}", response_model=SavedView)
def get_view(lake: LakeDep, view_id: IdPath) -> dict:
    return curation.get_view(lake, view_id)


@router.patch("/views/{view_id}", response_model=SavedView)
def update_view(lake: LakeDep, who: CuratorDep, view_id: IdPath, body: SavedViewUpdate) -> dict:
    """Replace the view's filters with the ones given (a view opened and then changed, kept as
    it is now); its name, id and link stay."""
    return curation.update_view(lake, view_id, body.filters.model_dump(mode="json", exclude_defaults=True),
                                who=who)


@router.delete("/views/{view_id}", status_code=204, response_class=Response)
def delete_view(lake: LakeDep, who: CuratorDep, view_id: IdPath) -> Response:
    curation.delete_view(lake, view_id, who=who)
    return Response(status_code=204)
