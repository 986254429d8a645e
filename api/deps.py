"""Dependency aliases for route functions: the open lake, the settings, the background jobs,
who asks for a job, the episode filter."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from episodelake.api.jobs import Jobs
from episodelake.api.listing import EpisodeFilter
from episodelake.api.settings import Settings
from episodelake.lake.lake import Lake
from episodelake.lake.layout import check_id


def get_lake(request: Request) -> Lake:
    return request.app.state.lake


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_jobs(request: Request) -> Jobs:
    return request.app.state.jobs


def requester(request: Request) -> str:
    """Who asked for a job, as far as the server can tell (it has no user accounts): the API
    and the client's address."""
    return f"api {request.client.host}" if request.client else "api"


LakeDep = Annotated[Lake, Depends(get_lake)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
JobsDep = Annotated[Jobs, Depends(get_jobs)]
WhoDep = Annotated[str, Depends(requester)]


def episode_filter(
    task: Annotated[str | None, Query(max_length=500, description="task_name")] = None,
    success: Annotated[bool | None, Query(description="judged outcome")] = None,
    unjudged: Annotated[bool, Query(description="only episodes not judged yet")] = False,
    run_id: Annotated[str | None, Query(max_length=200)] = None,
    policy_version: Annotated[str | None, Query(max_length=200)] = None,
    group_id: Annotated[str | None, Query(max_length=200)] = None,
    env: Annotated[str | None, Query(max_length=200)] = None,
    tag: Annotated[str | None, Query(max_length=200, description="one of the episode's tags")] = None,
    set_id: Annotated[str | None, Query(max_length=200, description="member of this set")] = None,
    zero_step_reward: Annotated[bool, Query(description="some step has step_reward = 0")] = False,
    min_length: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
    max_length: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
    where: Annotated[str | None, Query(max_length=4000, description="SQL condition over episodes columns, run in the sandbox")] = None,
) -> EpisodeFilter:
    if set_id is not None:
        check_id(set_id, "set_id")
    return EpisodeFilter(task=task, success=success, unjudged=unjudged, run_id=run_id,
                         policy_version=policy_version, group_id=group_id, env=env, tag=tag,
                         set_id=set_id, zero_step_reward=zero_step_reward, min_length=min_length,
                         max_length=max_length, where=where)


FilterDep = Annotated[EpisodeFilter, Depends(episode_filter)]
