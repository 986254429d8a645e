"""One step in full, and its screenshot: original bytes, annotated, or as a thumbnail."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from episodelake.api.deps import LakeDep
from episodelake.api.models import StepDetail
from episodelake.api.routes.episodes import step_out
from episodelake.lake import overlay
from episodelake.lake.errors import NotFound
from episodelake.lake.images import MEDIA_TYPES
from episodelake.lake.lake import Lake
from episodelake.lake.layout import check_id

router = APIRouter(tags=["steps"])

StepNo = Annotated[int, Path(ge=0, le=1_000_000)]
#: Screenshots of a stored step never change (steps are append-only); a private cache
#: lets the browser step back and forth without asking again.
IMAGE_CACHE = "private, max-age=3600"


def step_row(lake: Lake, episode_id: str, step: int) -> dict:
    check_id(episode_id, "episode_id")
    rows = lake.sql("SELECT * FROM steps WHERE episode_id = ? AND step = ?", [episode_id, step]).to_pylist()
    if not rows:
        lake.episode(episode_id)  # a missing episode says so, rather than "no step"
        raise NotFound(f"episode {episode_id!r} has no step {step}")
    return rows[0]


@router.get("/episodes/{episode_id}/steps/{step}", response_model=StepDetail)
def step(lake: LakeDep, episode_id: str, step: StepNo) -> dict:
    """One step with its prompt and collector info."""
    return step_out(step_row(lake, episode_id, step))


@router.get(
    "/episodes/{episode_id}/steps/{step}/image",
    response_class=Response,
    responses={200: {"content": {t: {} for t in MEDIA_TYPES.values()},
                     "description": "the screenshot as stored, or a rendering of it"}},
)
def step_image(
    lake: LakeDep, episode_id: str, step: StepNo,
    annotated: Annotated[bool, Query(description="draw the action on it (PNG, or JPEG with max_side)")] = False,
    max_side: Annotated[int | None, Query(ge=32, le=4096, description="scale down to this many pixels on the long side (JPEG)")] = None,
) -> Response:
    """The screenshot bytes exactly as recorded, unless asked to annotate or scale them."""
    data, fmt = lake.image(episode_id, step)
    if annotated:
        view = step_out(step_row(lake, episode_id, step))["action_view"]
        data = overlay.draw_action(data, view, max_side=max_side, fmt="jpeg" if max_side else "png")
        fmt = "jpeg" if max_side else "png"
    elif max_side:
        data, fmt = overlay.thumbnail(data, max_side), "jpeg"
    if fmt not in MEDIA_TYPES:
        raise NotFound(f"episode {episode_id!r} step {step} has no image in a known format")
    return Response(data, media_type=MEDIA_TYPES[fmt], headers={"Cache-Control": IMAGE_CACHE})
