"""GET /api/episodes (filtered, sorted, paged) and GET /api/episodes/{episode_id}."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from episodelake.api.deps import FilterDep, LakeDep, SettingsDep
from episodelake.api.listing import SORTS, list_episodes
from episodelake.api.models import EpisodeDetail, EpisodePage
from episodelake.lake import curation, overlay
from episodelake.lake.lake import Lake

router = APIRouter(tags=["episodes"])

SortField = Literal[tuple(SORTS)]  # type: ignore[valid-type]  # listing.SORTS' keys, read at import


def image_url(episode_id: str, step: int) -> str:
    return f"/api/episodes/{episode_id}/steps/{step}/image"


def parse_json(text: str | None, field: str) -> dict | None:
    """A JSON text column as an object; anything else (old or foreign data) is wrapped."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return {"unparsed": text, "field": field}
    return value if isinstance(value, dict) else {"value": value}


def episode_out(row: dict) -> dict:
    return {**row, "extra": parse_json(row.get("extra"), "extra")}


def step_out(row: dict) -> dict:
    """A steps row as the API sends it, with the one description of its action that the web
    app's overlay and the annotated screenshot both draw."""
    out = {**row, "action": parse_json(row.get("action"), "action"),
           "image_url": image_url(row["episode_id"], row["step"]) if row.get("image_format") else None}
    out["action_view"] = overlay.describe_step(out)
    return out


@router.get("/episodes", response_model=EpisodePage)
def episodes(
    lake: LakeDep, settings: SettingsDep, filt: FilterDep,
    sort: SortField = "created_at",  # type: ignore[valid-type]  # SortField is built at import
    order: Literal["asc", "desc"] = "desc",
    limit: Annotated[int | None, Query(ge=1, le=500)] = None,
    cursor: Annotated[str | None, Query(max_length=2000)] = None,
) -> dict:
    rows, next_cursor, total = list_episodes(
        lake, filt, sort=sort, descending=order == "desc", limit=min(limit or settings.page_size, settings.max_page_size),
        cursor=cursor, timeout_s=settings.sql_timeout_s)
    return {"items": [episode_out(r) for r in rows], "next_cursor": next_cursor, "total": total}


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
def episode(lake: LakeDep, episode_id: str) -> dict:
    """The episode, its steps (no image bytes, no prompts), its sets and annotations."""
    return episode_detail(lake, episode_id)
