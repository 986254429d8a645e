"""Curated sets and their members: /api/sets, /api/sets/{set_id}, /api/sets/{set_id}/members.

A set's GET answers its version as the ETag; a change sent with `If-Match` from an older
version is refused with a 412 that names who saved the newer one (`lake.curation.versions`)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from episodelake.api.deps import CuratorDep, IdPath, IfMatchDep, LakeDep, SettingsDep, etag, needs
from episodelake.api.errors import STALE_RESPONSES
from episodelake.api.listing import where_clause
from episodelake.api.models import (
    Member,
    MemberPut,
    MembersAdd,
    MembersAdded,
    Review,
    ReviewPut,
    Set,
    SetCreate,
    SetUpdate,
)
from episodelake.lake.curation import curation, reviews
from episodelake.lake.ops.episode_reads import episode_ids_where
from episodelake.lake.storage.errors import InvalidInput

router = APIRouter(tags=["sets"])


@router.get("/sets", response_model=list[Set])
def list_sets(lake: LakeDep) -> list[dict]:
    return curation.list_sets(lake)


@router.post("/sets", response_model=Set, status_code=201)
def create_set(lake: LakeDep, who: CuratorDep, body: SetCreate, response: Response) -> dict:
    return etag(response, curation.create_set(lake, body.name, body.kind, body.description, body.pinned_tag, who=who))


@router.get("/sets/{set_id}", response_model=Set)
def get_set(lake: LakeDep, set_id: IdPath, response: Response) -> dict:
    """The set; its version is the ETag, to send back as If-Match with a change."""
    return etag(response, curation.get_set(lake, set_id))


@router.patch("/sets/{set_id}", response_model=Set, responses=STALE_RESPONSES)
def update_set(lake: LakeDep, who: CuratorDep, set_id: IdPath, body: SetUpdate, version: IfMatchDep,
               response: Response) -> dict:
    """Rename, describe, change the kind, pin to a tag (null unpins), assign; only the fields
    sent change. With If-Match, a set saved since is refused (412, naming who saved it)."""
    return etag(response, curation.update_set(lake, set_id, who=who, expected_version=version,
                                              **body.model_dump(exclude_unset=True)))


@router.delete("/sets/{set_id}", status_code=204, response_class=Response, openapi_extra=needs("admin"),
               responses=STALE_RESPONSES)
def delete_set(lake: LakeDep, who: CuratorDep, set_id: IdPath, version: IfMatchDep) -> Response:
    """Delete the set (an admin's: its members go with it for everyone)."""
    curation.delete_set(lake, set_id, who=who, expected_version=version)
    return Response(status_code=204)


@router.get("/sets/{set_id}/members", response_model=list[Member])
def members(lake: LakeDep, set_id: IdPath) -> list[dict]:
    """Live members, each with its reviews and review state."""
    return reviews.members(lake, set_id)


@router.put("/sets/{set_id}/members/{episode_id}/review", response_model=Review)
def review(lake: LakeDep, who: CuratorDep, set_id: IdPath, episode_id: IdPath, body: ReviewPut) -> dict:
    """Record your review of a member (a second opinion: the member's own fields stay); two
    reviews that agree on category and failing step make it agreed, else disputed."""
    return reviews.review(lake, set_id, episode_id, who or body.reviewer, failure_category=body.failure_category,
                          failing_step=body.failing_step, note=body.note)


@router.post("/sets/{set_id}/members", response_model=MembersAdded)
def add_members(lake: LakeDep, settings: SettingsDep, who: CuratorDep, set_id: IdPath, body: MembersAdd) -> dict:
    """File many episodes at once: `episode_ids`, or every episode `filter` matches (as the
    episode list shows them). Members already in the set keep their curation."""
    if (body.episode_ids is None) == (body.filter is None):
        raise InvalidInput("give episode_ids or filter, one of the two")
    ids = body.episode_ids
    if body.filter is not None:
        condition, params = where_clause(lake, body.filter, timeout_s=settings.sql_timeout_s)
        ids = episode_ids_where(lake, condition, params)
    return curation.add_members(lake, set_id, ids or [], failure_category=body.failure_category, note=body.note,
                                added_by=who or "web")


@router.put("/sets/{set_id}/members/{episode_id}", response_model=Member)
def put_member(lake: LakeDep, who: CuratorDep, set_id: IdPath, episode_id: IdPath, body: MemberPut) -> dict:
    """Add the episode to the set, or replace its category, failing step and note; `added_by`
    is the signed-in person where the server has users, else as sent."""
    fields = body.model_dump()
    return curation.add_member(lake, set_id, episode_id, **{**fields, "added_by": who or fields["added_by"]})


@router.delete("/sets/{set_id}/members/{episode_id}", status_code=204, response_class=Response)
def remove_member(lake: LakeDep, who: CuratorDep, set_id: IdPath, episode_id: IdPath) -> Response:
    curation.remove_member(lake, set_id, episode_id, who=who)
    return Response(status_code=204)
