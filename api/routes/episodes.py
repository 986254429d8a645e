"""GET /api/episodes (filtered, sorted, paged), GET /api/episodes/{episode_id} and its place
in a filtered list (/queue).

The list carries an ETag made of every table's version: the lake's version is all a list
depends on, so a client that polls with If-None-Match (the web app's live view) is answered
304 without a query until something is written."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Response

from episodelake.api.deps import FilterDep, IdPath, LakeDep, SettingsDep
from episodelake.api.listing import SORTS, list_episodes, queue_position
from episodelake.api.models import EpisodeDetail, EpisodePage, QueuePosition
from episodelake.api.shaping import episode_out, step_out
from episodelake.lake.curation import curation
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.layout import check_id

router = APIRouter(tags=["episodes"])

SortField = Literal[tuple(SORTS)]  # type: ignore[valid-type]  # listing.SORTS' keys, read at import


def lake_etag(lake: Lake) -> str:
    """A weak ETag naming the version of every table (one consistent snapshot)."""
    versions = lake.current_versions()
    return 'W/"' + ".".join(str(versions[t]) for t in sorted(versions)) + '"'


@router.get("/episodes", response_model=EpisodePage, responses={304: {"description": "nothing changed since the ETag sent"}})
def episodes(
    lake: LakeDep, settings: SettingsDep, filt: FilterDep, response: Response,
    sort: SortField = "created_at",  # type: ignore[valid-type]  # SortField is built at import
    order: Literal["asc", "desc"] = "desc",
    limit: Annotated[int | None, Query(ge=1, le=500)] = None,
    cursor: Annotated[str | None, Query(max_length=2000)] = None,
    if_none_match: Annotated[str | None, Header(max_length=2000)] = None,
) -> dict | Response:
    etag = lake_etag(lake)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if if_none_match is not None and etag in (tag.strip() for tag in if_none_match.split(",")):
        return Response(status_code=304, headers=headers)
    response.headers.update(headers)
    rows, next_cursor, total = list_episodes(
        lake, filt, sort=sort, descending=order == "desc", limit=min(limit or settings.page_size, settings.max_page_size),
        cursor=cursor, timeout_s=settings.sql_timeout_s)
    return {"items": [episode_out(r) for r in rows], "next_cursor": next_cursor, "total": total}


@router.get("/episodes/{episode_id}/queue", response_model=QueuePosition)
def queue(
    lake: LakeDep, settings: SettingsDep, filt: FilterDep, episode_id: IdPath,
    sort: SortField = "created_at",  # type: ignore[valid-type]  # SortField is built at import
    order: Literal["asc", "desc"] = "desc",
) -> dict:
    """The episode's position in the list the filter selects (sorted as GET /episodes
    sorts), and its neighbours there: an annotation queue steps through these."""
    return queue_position(lake, filt, check_id(episode_id, "episode_id"), sort=sort, descending=order == "desc",
                          timeout_s=settings.sql_timeout_s)


def episode_detail(lake: Lake, episode_id: str) -> dict:
    episode = lake.episode(episode_id)
    steps = lake.steps(episode_id).to_pylist()
    return {
        "episode": episode_out(episode),
        "steps": [step_out(s) for s in steps],
        "memberships": curation.memberships(lake, episode_id),
        "annotations": curation.annotations(lake, episode_id),
    }


@router.get("/episodes/{episode_id}", response_model=EpisodeDetail)
def episode(lake: LakeDep, episode_id: IdPath) -> dict:
    """The episode, its steps (no image bytes, no prompts), its sets and annotations."""
    return episode_detail(lake, episode_id)
