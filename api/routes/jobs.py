"""GET /api/jobs: every long job (exports, re-runs, ClawGUI imports, judge back-fills),
started from the command line or the API, from the lake's jobs table, with live progress for
the ones this server runs now; a job whose process died reads `interrupted`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from episodelake.api.deps import IdPath, JobsDep
from episodelake.api.models import JobOut
from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import NotFound
from episodelake.lake.storage.layout import check_id

router = APIRouter(tags=["jobs"])


@router.get("/jobs", response_model=list[JobOut])
def jobs_list(
    jobs: JobsDep,
    kind: Annotated[str | None, Query(max_length=40, description="export | rerun | import | judge")] = None,
    status: Annotated[schema.JobStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[dict]:
    """Jobs, newest first."""
    return jobs.list(kind=kind, status=status, limit=limit)


@router.get("/jobs/{job_id}", response_model=JobOut)
def job(jobs: JobsDep, job_id: IdPath) -> dict:
    """One job: status, progress, error, what it was asked to do."""
    check_id(job_id, "job_id")
    found = jobs.get(job_id)
    if found is None:
        raise NotFound(f"no job {job_id!r}; GET /api/jobs lists them")
    return found
