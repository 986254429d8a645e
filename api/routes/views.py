"""Saved views, named episode filters shared through the lake: /api/views, /api/views/{view_id}
(read, create, replace a view's filters, delete), /api/views/{view_id}/assignee (assign the
view, as a curation queue, to a person, or unassign it) and /api/me/views (the queues
assigned to the signed-in person). Each change is in the audit log. A view's GET answers its
version as the ETag; a change sent with `If-Match` from an older version is refused with a 412
naming who saved the newer one."""

from __future__ import annotations

from fastapi import APIRouter, Response

from episodelake.api.deps import CuratorDep, IdPath, IfMatchDep, LakeDep, PersonDep, etag
from episodelake.api.errors import STALE_RESPONSES
from episodelake.api.models import SavedView, SavedViewAssign, SavedViewCreate, SavedViewUpdate
from episodelake.lake.curation import curation

router = APIRouter(tags=["views"])


@router.get("/views", response_model=list[SavedView])
def list_views(lake: LakeDep) -> list[dict]:
    """Every saved view, by name."""
    return curation.list_views(lake)


@router.post("/views", response_model=SavedView, status_code=201)
def create_view(lake: LakeDep, who: CuratorDep, body: SavedViewCreate, response: Response) -> dict:
    """Save a filter under a name no other view has (409 names the view that has it)."""
    return etag(response, curation.create_view(
        lake, body.name, body.filters.model_dump(mode="json", exclude_defaults=True), who=who))


@router.get("/views/{view_id}", response_model=SavedView)
def get_view(lake: LakeDep, view_id: IdPath, response: Response) -> dict:
    """The view; its version is the ETag, to send back as If-Match with a change."""
    return etag(response, curation.get_view(lake, view_id))


@router.patch("/views/{view_id}", response_model=SavedView, responses=STALE_RESPONSES)
def update_view(lake: LakeDep, who: CuratorDep, view_id: IdPath, body: SavedViewUpdate, version: IfMatchDep,
                response: Response) -> dict:
    """Replace the view's filters with the ones given (a view opened and then changed, kept as
    it is now); its name, id and link stay. With If-Match, a view saved since is refused (412)."""
    return etag(response, curation.update_view(
        lake, view_id, body.filters.model_dump(mode="json", exclude_defaults=True), who=who,
        expected_version=version))


@router.delete("/views/{view_id}", status_code=204, response_class=Response, responses=STALE_RESPONSES)
def delete_view(lake: LakeDep, who: CuratorDep, view_id: IdPath, version: IfMatchDep) -> Response:
    curation.delete_view(lake, view_id, who=who, expected_version=version)
    return Response(status_code=204)


@router.put("/views/{view_id}/assignee", response_model=SavedView, responses=STALE_RESPONSES)
def assign_view(lake: LakeDep, who: CuratorDep, view_id: IdPath, body: SavedViewAssign, version: IfMatchDep,
                response: Response) -> dict:
    """Assign the view to a person, whose queue it becomes (422 names the lake's users when
    `assigned_to` is none of them); the audit row `view.assign` holds the view before and after."""
    return etag(response, curation.assign_view(lake, view_id, body.assigned_to, who=who, expected_version=version))


@router.delete("/views/{view_id}/assignee", response_model=SavedView, responses=STALE_RESPONSES)
def unassign_view(lake: LakeDep, who: CuratorDep, view_id: IdPath, version: IfMatchDep, response: Response) -> dict:
    """Assign the view to nobody (audit row `view.unassign`)."""
    return etag(response, curation.assign_view(lake, view_id, None, who=who, expected_version=version))


@router.get("/me/views", response_model=list[SavedView])
def my_views(lake: LakeDep, user: PersonDep) -> list[dict]:
    """The saved views assigned to the signed-in person, by name: their queues. Nobody signs in
    on a server that needs no token, so there it is empty."""
    return curation.list_views(lake, assigned_to=user.name) if user is not None else []
