"""Dependency aliases for route functions: the open lake, the settings, the background jobs,
who asks for a job, the episode filter."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from episodelake.api.jobs import Jobs
from episodelake.api.listing import EpisodeFilter
from episodelake.api.settings import Settings
from episodelake.lake.core.lake import Lake


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


#: The episode filter, its fields as query parameters.
FilterDep = Annotated[EpisodeFilter, Query()]
