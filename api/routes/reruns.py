"""Regression re-runs: list them, read one's report, start one on the simulated phone.

POST /api/reruns runs `run_rerun` as a job (see `episodelake.api.jobs`; the job id is the
re-run id) with one of the simulated phone's own policies. A re-run's status, progress and
error are its job's (`rerun_state`), so one whose process died shows `interrupted`. Re-runs
that drive a model endpoint or a real device take URLs and device names, which a request
should not choose for the server: those start from the command line (`elake rerun`) and
show up here like any other, with their job.
"""

from __future__ import annotations

from fastapi import APIRouter

from episodelake.api.deps import IdPath, JobsDep, LakeDep, SettingsDep, WhoDep
from episodelake.api.jobs import ACTIVE
from episodelake.api.models import RerunCreate, RerunDetail, RerunSummary
from episodelake.api.shaping import SIM_POLICIES
from episodelake.collectors.jobs.rerun import (
    RerunSpec,
    get_rerun,
    list_reruns,
    new_rerun_id,
    run_rerun,
)
from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.layout import check_id

router = APIRouter(tags=["reruns"])

KIND = "rerun"


def pending_out(job: dict) -> dict:
    """A re-run job not recorded yet: still checking its set, or failed before starting."""
    params = job["params"] or {}
    return {"rerun_id": job["job_id"], "created_at": job["created_at"], "status": job["status"], "set": None,
            "policy": params.get("policy"), "env": "sim", "n": params.get("n"), "progress": job["progress"],
            "error": job["error"]}


def rerun_of(lake: Lake, job: dict | None, rerun_id: str) -> dict:
    try:
        report = get_rerun(lake, rerun_id, job)
    except NotFound:
        if job is None:
            raise
        return pending_out(job)
    return {**report, "rerun_id": rerun_id}


@router.get("/reruns", response_model=list[RerunSummary])
def reruns(lake: LakeDep, jobs: JobsDep) -> list[dict]:
    """Every re-run, newest first (after this server's jobs not recorded yet), with its
    before and after success rates, the delta and its interval, and fixed/broke counts."""
    of_kind = jobs.of_kind(KIND)
    rows = list_reruns(lake, of_kind)
    recorded = {r["rerun_id"] for r in rows}
    pending = [pending_out(j) for j in of_kind.values() if j["job_id"] not in recorded and j["status"] in ACTIVE]
    return pending + rows


@router.post("/reruns", response_model=RerunDetail, status_code=202)
def start_rerun(lake: LakeDep, settings: SettingsDep, jobs: JobsDep, body: RerunCreate,
                who: WhoDep) -> dict:
    """Re-run every task of a set `n` times on the simulated phone; follow it at
    GET /api/reruns/{rerun_id}. An unknown set, an empty one or tasks that are not the
    simulated phone's are this request's error; one re-run runs at a time (409)."""
    if body.policy.split(":", 1)[0] not in SIM_POLICIES:
        raise InvalidInput(f"policy must be one of {', '.join(SIM_POLICIES)} (noisy:P for a share P of "
                           f"random steps), not {body.policy!r}; re-runs with a model endpoint start with "
                           "`elake rerun --policy model --model-url URL --model NAME`")
    spec = RerunSpec(env="sim", **body.model_dump())
    rerun_id = new_rerun_id()
    job = jobs.start(KIND, rerun_id, lambda job: run_rerun(lake, spec, job=job),
                     wait_s=settings.job_start_wait_s, params=body.model_dump(mode="json"),
                     who=who)
    return rerun_of(lake, job, rerun_id)


@router.get("/reruns/{rerun_id}", response_model=RerunDetail)
def rerun(lake: LakeDep, jobs: JobsDep, rerun_id: IdPath) -> dict:
    """One re-run's report: per task before/after, fixed and broke, the delta with its interval."""
    check_id(rerun_id, "rerun_id")
    return rerun_of(lake, jobs.get(rerun_id), rerun_id)
