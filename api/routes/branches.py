"""Branches: start N continuations of an episode from its step K, follow the job, list an
episode's branches.

POST /api/branches runs `run_branches` (see `episodelake.collectors.jobs.branch`) as a job of
kind ``branch`` (see `episodelake.api.jobs`; the job id is the branches' ``run_id``) with one
of the simulated phone's own policies, on a parent recorded on the simulated phone. The
parent and its step are checked before the job starts (`branch_point`: a step beyond the
episode, a step before K without an action, a parent that cannot be reset to its task), so a
bad step is this request's 422, naming the episode and the step, and leaves no job behind.
Branches of adb phones or environment servers, or with a model endpoint, take device names
and URLs a request should not choose for the server: those start from the command line
(`elake branch`) and show up here like any other, with their job.

GET /api/branches/{branch_id} is one job with its progress and the branches it recorded;
GET /api/episodes/{episode_id}/branches is an episode's branches (`episodes.branch_of`) and
the branch jobs started from it, which the replay page lists under the episode.
"""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import APIRouter, Query

from episodelake.api.deps import IdPath, JobsDep, LakeDep, SettingsDep, WhoDep, needs
from episodelake.api.models import BranchCreate, BranchJob, EpisodeBranches
from episodelake.api.shaping import SIM_POLICIES, episode_out
from episodelake.collectors.jobs.branch import (
    BranchSpec,
    branch_point,
    new_branch_id,
    run_branches,
)
from episodelake.lake.ops import episode_reads
from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.layout import check_id

router = APIRouter(tags=["branches"])

KIND = "branch"
#: The env whose parents the API branches (the others need `--server`/`--serial`).
API_ENV = "sim"
#: Steps a branch gets after K at least, where the request leaves `max_steps` out.
OWN_STEPS = 10
#: The command line's `--max-steps` default (BranchSpec's), where that leaves OWN_STEPS after K.
DEFAULT_MAX_STEPS: int = cast(int, BranchSpec.__dataclass_fields__["max_steps"].default)


def branches_of(lake: Lake, column: episode_reads.BranchColumn, value: str) -> list[dict]:
    """Episodes whose `column` (branch_of, run_id) is `value`, by branch step, oldest first."""
    return [episode_out(r) for r in episode_reads.branches_of(lake, column, value)]


def job_out(lake: Lake, job: dict) -> dict:
    """A branch job as the API answers it: its request, progress, and what it recorded."""
    params, result = job.get("params") or {}, job.get("result") or {}
    ids, at = params.get("episode_ids") or [], params.get("at")
    step = params.get("step")  # the API's jobs resolve `failing`; the command line's keep `at` as given
    if step is None and isinstance(at, str) and at.isdigit():
        step = int(at)
    return {"branch_id": job["job_id"], "parent": ids[0] if len(ids) == 1 else None,
            "step": step, "at": at, "n": params.get("n"),
            "policy": params.get("policy"), "status": job["status"], "progress": job["progress"],
            "error": job["error"], "who": job.get("who"), "created_at": job["created_at"],
            "finished_at": job.get("finished_at"), "branches": branches_of(lake, "run_id", job["job_id"]),
            "refused": result.get("refused") or []}


def checked_spec(lake: Lake, body: BranchCreate) -> BranchSpec:
    """The request as a branch job's spec, its parent and step checked: the parent must be a
    simulated phone's episode and its step K one the replay can reach (`branch_point` names
    the episode and the step otherwise)."""
    if body.policy.split(":", 1)[0] not in SIM_POLICIES:
        raise InvalidInput(f"policy must be one of {', '.join(SIM_POLICIES)} (noisy:P for a share P of "
                           f"random steps), not {body.policy!r}; branches with a model endpoint start with "
                           f"`elake branch {body.episode_id} --at {body.at} --policy model --model-url URL "
                           "--model NAME`")
    parent = lake.episode(body.episode_id)
    if parent.get("env") != API_ENV:
        raise InvalidInput(f"episode {body.episode_id} was recorded on env {parent.get('env')!r}: the web app "
                           f"branches episodes of the simulated phone ({API_ENV!r}); branch it from the command "
                           f"line, naming the device: `elake branch {body.episode_id} --at {body.at} "
                           f"--n {body.n} --policy {body.policy} --server URL` (or --serial)")
    at = None if body.at == "failing" else body.at
    point = branch_point(lake, body.episode_id, at)  # K beyond the episode, no action before K, ...
    max_steps = body.max_steps or max(DEFAULT_MAX_STEPS, point.step + OWN_STEPS)
    if point.step >= max_steps:
        raise InvalidInput(f"episode {body.episode_id}: a branch at step {point.step} needs max_steps above "
                           f"{point.step} (max_steps counts the replayed steps too)")
    return BranchSpec(episode_ids=(body.episode_id,), at=str(point.step), n=body.n, policy=body.policy,
                      max_steps=max_steps, seed=body.seed)


@router.post("/branches", response_model=BranchJob, status_code=202, openapi_extra=needs("curator"))
def start_branches(lake: LakeDep, settings: SettingsDep, jobs: JobsDep, body: BranchCreate,
                   who: WhoDep) -> dict:
    """Record `n` branches of an episode of the simulated phone from its step K (or its failing
    step); follow them at GET /api/branches/{branch_id}. An unknown episode, a step it cannot
    be branched at and a parent that is not the simulated phone's are this request's error;
    one branch job runs at a time (409)."""
    spec = checked_spec(lake, body)
    branch_id = new_branch_id()
    params = {**body.model_dump(mode="json"), "episode_ids": [body.episode_id], "step": int(spec.at),
              "at": str(body.at), "max_steps": spec.max_steps}
    job = jobs.start(KIND, branch_id, lambda job: run_branches(lake, spec, job=job),
                     wait_s=settings.job_start_wait_s, params=params, who=who)
    return job_out(lake, job)


@router.get("/branches", response_model=list[BranchJob])
def branch_jobs(jobs: JobsDep, lake: LakeDep,
                limit: Annotated[int, Query(ge=1, le=200)] = 50) -> list[dict]:
    """Branch jobs, newest first (from the command line too), with this server's live progress."""
    return [job_out(lake, j) for j in jobs.list(kind=KIND, limit=limit)]


@router.get("/branches/{branch_id}", response_model=BranchJob)
def branch_job(lake: LakeDep, jobs: JobsDep, branch_id: IdPath) -> dict:
    """One branch job: its progress, the branches recorded so far, the ones refused and why."""
    check_id(branch_id, "branch_id")
    job = jobs.get(branch_id)
    if job is None or job["kind"] != KIND:
        raise NotFound(f"no branch job {branch_id!r}; GET /api/branches lists them")
    return job_out(lake, job)


@router.get("/episodes/{episode_id}/branches", response_model=EpisodeBranches)
def episode_branches(lake: LakeDep, jobs: JobsDep, episode_id: IdPath) -> dict:
    """The episode's branches (episodes whose `branch_of` is it) and the branch jobs started
    from it alone, newest first, with their progress."""
    lake.episode(check_id(episode_id, "episode_id"))  # NotFound names it
    started = [j for j in jobs.of_kind(KIND).values() if (j.get("params") or {}).get("episode_ids") == [episode_id]]
    return {"episode_id": episode_id, "branches": branches_of(lake, "branch_of", episode_id),
            "jobs": [job_out(lake, j) for j in started]}
