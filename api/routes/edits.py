"""Edits of episodes, for the replay's repair actions: retask, split, delete, undo.

`POST /api/episodes/{episode_id}/retask`, `POST /api/episodes/{episode_id}/split`,
`DELETE /api/episodes/{episode_id}`, `POST /api/edits/{job_id}/undo`. Each is an edit of
`episodelake.lake.ops.edits`, recorded as a job (kind `edit`) with the requester as `who`,
and answers the edit's job id (what undo takes), the episodes it touched and the table
versions before it. Whoever may call the API may edit (the server's token guards it when
one is set); the web app asks for confirmation first. Purging stays on the command line
(`elake purge`): it needs the lake to itself.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from episodelake.api.deps import IdPath, LakeDep, WhoDep, needs
from episodelake.lake.ops import edits

router = APIRouter(tags=["edits"])


class RetaskRequest(BaseModel):
    task_name: str | None = Field(None, description="the new task name (unchanged when null)")
    task_goal: str | None = Field(None, description="the new goal (unchanged when null)")
    group_id: str | None = Field(None, description="put the episode in this group; when null and the "
                                 "task changes, the episode leaves its group")


class SplitRequest(BaseModel):
    at: int = Field(description="the first step of the new episode (1..n-1)")
    new_id: str | None = Field(None, description="the new episode's id (default `<episode_id>.<at>`)")


class EditResult(BaseModel):
    job_id: str = Field(description="the edit's job: `POST /api/edits/{job_id}/undo` puts it back")
    op: str = Field(description="retask | split | delete | undo")
    episode_ids: list[str] = Field(description="the episodes it touched (a split: the episode and its new part)")
    versions_before: dict[str, int] = Field(description="table -> version read before the edit")


def _answer(report: dict) -> dict:
    return {k: report[k] for k in ("job_id", "op", "episode_ids", "versions_before")}


@router.post("/episodes/{episode_id}/retask", response_model=EditResult, openapi_extra=needs("admin"))
def retask(lake: LakeDep, who: WhoDep, episode_id: IdPath, body: RetaskRequest) -> dict:
    """Give the episode another task name and/or goal."""
    return _answer(edits.retask(lake, episode_id, task=body.task_name, goal=body.task_goal,
                                group=body.group_id, who=who))


@router.post("/episodes/{episode_id}/split", response_model=EditResult, openapi_extra=needs("admin"))
def split(lake: LakeDep, who: WhoDep, episode_id: IdPath, body: SplitRequest) -> dict:
    """Cut the episode before step `at`; the rest becomes a new episode numbered from 0."""
    return _answer(edits.split(lake, episode_id, body.at, new_id=body.new_id, who=who))


@router.delete("/episodes/{episode_id}", response_model=EditResult, openapi_extra=needs("admin"))
def delete(lake: LakeDep, who: WhoDep, episode_id: IdPath) -> dict:
    """Delete the episode from the current version (older versions keep it until a purge)."""
    return _answer(edits.delete(lake, [episode_id], who=who))


@router.post("/edits/{job_id}/undo", response_model=EditResult, openapi_extra=needs("admin"))
def undo(lake: LakeDep, who: WhoDep, job_id: IdPath) -> dict:
    """Put the episodes an edit touched back as they were before it."""
    return _answer(edits.undo(lake, job_id, who=who))
