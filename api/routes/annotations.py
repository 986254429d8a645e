"""Per-step annotations: list and add under an episode, delete by id."""

from fastapi import APIRouter, Response

from episodelake.api.deps import CuratorDep, IdPath, LakeDep
from episodelake.api.models import Annotation, AnnotationCreate
from episodelake.lake.curation import curation

router = APIRouter(tags=["annotations"])


@router.get("/episodes/{episode_id}/annotations", response_model=list[Annotation])
def annotations(lake: LakeDep, episode_id: IdPath) -> list[dict]:
    lake.episode(episode_id)
    return curation.annotations(lake, episode_id)


@router.post("/episodes/{episode_id}/annotations", response_model=Annotation, status_code=201)
def annotate(lake: LakeDep, who: CuratorDep, episode_id: IdPath, body: AnnotationCreate) -> dict:
    """Label or note a step (or the episode); the author is the signed-in person where the
    server has users, else `author` as sent."""
    return curation.annotate(lake, episode_id, body.step, label=body.label, note=body.note,
                             author=who or body.author)


@router.delete("/annotations/{annotation_id}", status_code=204, response_class=Response)
def delete_annotation(lake: LakeDep, who: CuratorDep, annotation_id: IdPath) -> Response:
    curation.delete_annotation(lake, annotation_id, who=who)
    return Response(status_code=204)
