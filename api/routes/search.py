"""GET /api/search: full-text search over screen text (OCR), thinking, responses and goals."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from episodelake.api.deps import LakeDep, StepsWhere
from episodelake.lake.curation import search as lake_search
from episodelake.lake.ops.episode_reads import episode_context
from episodelake.lake.storage.layout import check_id

router = APIRouter(tags=["search"])


class OcrBox(BaseModel):
    """A line of text found on the screenshot; corners in fractions of its width and height."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    score: float


class SearchHit(BaseModel):
    episode_id: str
    step: int | None = Field(description="null for a hit in the episode's goal")
    field: str = Field(description=f"where the words are: {', '.join(lake_search.FIELDS)}")
    snippet: str
    score: float = Field(description="BM25 relevance within its field")
    boxes: list[OcrBox] = Field(description="the screenshot's lines holding a query word (field screen)")
    terms: list[str] = Field(description="the field's words that matched, lower-cased, to highlight "
                             "in its text (the index matches stems: 'failed' for 'failing')")
    task_name: str | None = None


class SearchCoverage(BaseModel):
    """How much of the lake the screen-text part of a search can see yet."""

    screenshots: int = Field(description="steps with a screenshot")
    screens_read: int = Field(description="of them, those whose text is read (OCR)")
    pending: int = Field(description="screenshots waiting for their text to be read")
    how: str = Field(description="how to have the rest read")


@router.get("/search/coverage", response_model=SearchCoverage)
def coverage(lake: LakeDep) -> dict:
    """Whether "nothing matched" means nothing is there or nothing has been read yet: screen
    text is read after steps are committed (a server's worker, `elake enrich --what ocr`)."""
    from episodelake.lake.derive.derivations import coverage as derived_coverage

    ocr = derived_coverage(lake, "ocr")
    return {"screenshots": ocr["screenshots"], "screens_read": ocr["done"], "pending": ocr["pending"],
            "how": "elake enrich --what ocr, or a server started with --background-enrich phash,ocr"}


@router.get("/search", response_model=list[SearchHit])
def search(
    lake: LakeDep,
    q: Annotated[str, Query(max_length=lake_search.MAX_QUERY, description="the words; every one must match")],
    where: StepsWhere = None,
    limit: Annotated[int, Query(ge=1, le=lake_search.MAX_LIMIT)] = 20,
    episode_id: Annotated[str | None, Query(max_length=256, description="only this episode's hits (the "
                                            "replay's): filtered inside the index search")] = None,
) -> list[dict]:
    """Best hits first; open a step hit at /api/episodes/{episode_id}/steps/{step} and draw
    `boxes` on its screenshot."""
    if episode_id is not None:
        check_id(episode_id, "episode_id")
    hits = lake_search.search(lake, q, where=where, limit=limit, episode_id=episode_id)
    context = episode_context(lake, (h.episode_id for h in hits))
    return [{**asdict(hit), "task_name": context.get(hit.episode_id, {}).get("task_name")} for hit in hits]
