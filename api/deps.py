"""Dependency aliases for route functions: the open lake, the settings, the background jobs,
who asks (and whether their role allows the route), the episode filter."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request

from episodelake.api.errors import Forbidden
from episodelake.api.jobs import Jobs
from episodelake.api.listing import EpisodeFilter
from episodelake.api.settings import Settings
from episodelake.lake.core.lake import Lake
from episodelake.lake.core.layout import ID_MAX, ID_PATTERN
from episodelake.lake.core.schema import Role
from episodelake.lake.core.users import Principal


def get_lake(request: Request) -> Lake:
    return request.app.state.lake


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_jobs(request: Request) -> Jobs:
    return request.app.state.jobs


def person(request: Request) -> Principal | None:
    """The signed-in person (None on a server that needs no token)."""
    return getattr(request.state, "user", None)


def requester(request: Request) -> str:
    """Who asks: the signed-in person's name, else the API and the client's address."""
    user = person(request)
    if user is not None:
        return user.name
    return f"api {request.client.host}" if request.client else "api"


def curator_name(request: Request) -> str | None:
    """The name curation records as `added_by`/`author`/`who`: the signed-in person's, or
    None (then the request body's own, as on a server without users)."""
    user = person(request)
    return user.name if user is not None else None


#: The role a route needs when it does not say (`needs`): reading is a viewer's, changing a
#: curator's. Deleting shared things and editing recorded episodes are an admin's.
METHOD_ROLES: dict[str, Role] = {"GET": "viewer", "HEAD": "viewer", "OPTIONS": "viewer"}


def needs(role: Role) -> dict:
    """A route's `openapi_extra` naming the role it needs (shown in the OpenAPI document as
    `x-role`), e.g. `@router.post("/sql", openapi_extra=needs("viewer"))` for a read that posts."""
    return {"x-role": role}


def required_role(request: Request) -> Role:
    route = request.scope.get("route")
    extra = getattr(route, "openapi_extra", None) or {}
    return extra.get("x-role") or METHOD_ROLES.get(request.method, "curator")


def authorize(request: Request) -> None:
    """Refuse a signed-in person whose role does not include the route's (a dependency of
    every API route). Anonymous requests reach here only where the server needs no token."""
    user = person(request)
    role = required_role(request)
    if user is not None and not user.may(role):
        raise Forbidden(f"{user.name} is a {user.role}: {request.method} {request.url.path} needs the "
                        f"{role} role (an admin can change it: `elake user remove {user.name}` then "
                        f"`elake user add {user.name} --role {role}`)")


LakeDep = Annotated[Lake, Depends(get_lake)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
JobsDep = Annotated[Jobs, Depends(get_jobs)]
WhoDep = Annotated[str, Depends(requester)]
CuratorDep = Annotated[str | None, Depends(curator_name)]
PersonDep = Annotated[Principal | None, Depends(person)]


#: An id in a URL (episode, set, export, ...): the pattern every id follows, declared so the
#: OpenAPI document says what the server refuses.
IdPath = Annotated[str, Path(pattern=ID_PATTERN, max_length=ID_MAX,
                             description="letters, digits and . _ : @ + = -, starting with a letter or "
                             "digit, never '..'")]

#: The episode filter, its fields as query parameters.
FilterDep = Annotated[EpisodeFilter, Query()]
