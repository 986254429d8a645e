"""One step in full, and its screenshot: original bytes, annotated, or as a thumbnail.

Thumbnails are made once and kept on disk under the lake's cache folder
(`layout.thumbnail_path`), named by the screenshot's sha256: a stored screenshot never
changes, so a cached file never goes stale, identical screens across episodes share one,
and the cache outlives restarts and is shared by every server on the lake (an in-process
LRU would be rebuilt by each). Decoding and scaling a phone screenshot costs tens of
milliseconds; reading the cached JPEG, well under one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from episodelake.api.deps import IdPath, LakeDep, StepNo
from episodelake.api.images_cache import stored_image
from episodelake.api.models import StepDetail
from episodelake.api.shaping import step_out
from episodelake.lake.curation.redact import RedactRules, Region
from episodelake.lake.export.images import export_image
from episodelake.lake.ops.episode_reads import step_row
from episodelake.lake.storage import layout
from episodelake.lake.storage.errors import Conflict, NotFound
from episodelake.lake.storage.images import MEDIA_TYPES
from episodelake.lake.storage.lake import Lake
from episodelake.lake.vocab import overlay

log = logging.getLogger(__name__)
router = APIRouter(tags=["steps"])

#: Screenshots of a stored step never change (steps are append-only); a private cache
#: lets the browser step back and forth without asking again.
IMAGE_CACHE = "private, max-age=3600"
#: The rules of the API's redaction preview: the built-in ones (phone, e-mail, card).
PREVIEW_RULES = RedactRules()


def redaction_regions(row: dict) -> list[Region]:
    """The lines of a step's OCR text that the default rules (`PREVIEW_RULES`) mask; a step
    whose text was never read is a Conflict, since "nothing to mask" would be a guess."""
    if row["ocr_version"] is None:
        raise Conflict(f"episode {row['episode_id']!r} step {row['step']} has no OCR text to "
                       "redact by; run `elake enrich --what ocr`")
    return PREVIEW_RULES.redactor().find(row["ocr_boxes"] or [])


def thumbnail(lake: Lake, image: bytes, max_side: int) -> bytes:
    """The JPEG thumbnail of `image`, from the cache or made and cached now. A cache that
    cannot be written (a read-only lake) costs the next request a rendering, nothing else."""
    path = layout.thumbnail_path(lake.path, hashlib.sha256(image).hexdigest(), max_side)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    data = overlay.thumbnail(image, max_side)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)  # readers see the whole file or none
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        log.warning("thumbnail cache not written (%s): %s", path, exc)
    return data


@router.get("/episodes/{episode_id}/steps/{step}", response_model=StepDetail)
def step(lake: LakeDep, episode_id: IdPath, step: StepNo) -> dict:
    """One step with its prompt and collector info."""
    return step_out(step_row(lake, episode_id, step))


@router.get(
    "/episodes/{episode_id}/steps/{step}/image",
    response_class=Response,
    responses={200: {"content": {t: {} for t in MEDIA_TYPES.values()},
                     "description": "the screenshot as stored, or a rendering of it"}},
)
def step_image(
    lake: LakeDep, episode_id: IdPath, step: StepNo,
    annotated: Annotated[bool, Query(description="draw the action on it (PNG, or JPEG with max_side)")] = False,
    max_side: Annotated[int | None, Query(ge=32, le=4096, description="scale down to this many pixels on "
                                          "the long side (JPEG; without `annotated`, made once and cached)")] = None,
    redact: Annotated[bool, Query(description="mask the text lines of the step's OCR text that the "
                                  "default redaction rules match (phone numbers, e-mail addresses, card "
                                  "numbers), as `elake export sft --redact` does; 409 if the step has no "
                                  "OCR text")] = False,
) -> Response:
    """The screenshot bytes exactly as recorded, unless asked to redact, annotate or scale them."""
    data, fmt = stored_image(lake, episode_id, step)
    if fmt not in MEDIA_TYPES:
        raise NotFound(f"episode {episode_id!r} step {step} has no image in a known format")
    row = step_row(lake, episode_id, step) if redact or annotated else {}
    if redact:
        data = export_image(data, fmt, None, redaction_regions(row))
    if annotated:
        view = step_out(row)["action_view"]
        data = overlay.draw_action(data, view, max_side=max_side, fmt="jpeg" if max_side else "png")
        fmt = "jpeg" if max_side else "png"
    elif max_side:
        data, fmt = thumbnail(lake, data, max_side), "jpeg"
    return Response(data, media_type=MEDIA_TYPES[fmt], headers={"Cache-Control": IMAGE_CACHE})


class RedactedRegion(BaseModel):
    """A masked text line: the rule that matched it, and its box in fractions of the image."""

    rule: str
    x0: float
    y0: float
    x1: float
    y1: float


class Redaction(BaseModel):
    rules: list[str] = Field(description="the rules in force, in the order a line is tested")
    regions: list[RedactedRegion] = Field(description="what `?redact=1` masks on the screenshot")


@router.get("/episodes/{episode_id}/steps/{step}/redaction", response_model=Redaction)
def step_redaction(lake: LakeDep, episode_id: IdPath, step: StepNo) -> dict:
    """What the image's `?redact=1` masks, and by which rule; never the text that matched.
    409 if the step has no OCR text."""
    regions = redaction_regions(step_row(lake, episode_id, step))
    return {"rules": PREVIEW_RULES.rule_names(),
            "regions": [{"rule": r.rule, **dict(zip(("x0", "y0", "x1", "y1"), r.box, strict=True))}
                        for r in regions]}
