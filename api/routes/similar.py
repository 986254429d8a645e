"""GET /api/episodes/{episode_id}/steps/{step}/similar: screens like this step's, from any
episode, run or policy version (`lake.similar`)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from episodelake.api.deps import IdPath, LakeDep, StepNo, StepsWhere
from episodelake.api.shaping import image_url
from episodelake.lake.curation import similar as lake_similar
from episodelake.lake.ops.episode_reads import episode_context
from episodelake.lake.storage.layout import check_id

router = APIRouter(tags=["steps"])


class SimilarStep(BaseModel):
    episode_id: str
    step: int
    distance: float = Field(description="Euclidean distance between the screenshots' embeddings: "
                            "0 for the same screen, at most 2")
    task_name: str | None = None
    run_id: str | None = None
    policy_version: str | None = None
    image_url: str


@router.get("/episodes/{episode_id}/steps/{step}/similar", response_model=list[SimilarStep])
def similar_steps(
    lake: LakeDep, episode_id: IdPath, step: StepNo,
    k: Annotated[int, Query(ge=1, le=lake_similar.MAX_K, description="how many neighbours")] = 10,
    where: StepsWhere = None,
) -> list[dict]:
    """Nearest first, the step itself left out. A step whose screenshot has no embedding yet
    answers 404 naming `elake enrich --what embed`."""
    check_id(episode_id, "episode_id")
    found = lake_similar.similar(lake, episode_id, step, k=k, where=where)
    context = episode_context(lake, (n.episode_id for n in found))
    return [{**asdict(n), **context.get(n.episode_id, {}), "image_url": image_url(n.episode_id, n.step)}
            for n in found]
