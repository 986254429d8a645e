"""Per-step annotations: list and add under an episode, delete by id."""

from fastapi import APIRouter, Response

from episodelake.api.deps import LakeDep
from episodelake.api.models import Annotation, AnnotationCreate
from episodelake.lake.curation import curation

router = APIRouter(tags=["annotations"])


@router.get("/episodes/{episode_id}/annotations", response_model=list[Annotation])
def annotations(lake: LakeDep, episode_id: str) -> list[dict]:
    lake.episode(episode_id)
    return curation.annotations(lake, episode_id)


@router.post("/episodes/{episode_id}/annotations", response_model=Annotation, status_code=201)
def annotate(lake: LakeDep, episode_id: str, body: AnnotationCreate) -> dict:
    return curation.annotate(lake, episode_id, body.step, label=body.label, note=body.note, author=body.author)


@router.delete("/annotations/{annotation_id}", status_code=204, response_class=Response)
def delete_annotation(lake: LakeDep, annotation_id: str) -> Response:
    curation.delete_annotation(lake, annotation_id)
    return Response(status_code=204)
