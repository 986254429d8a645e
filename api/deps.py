"""Dependency aliases for route functions: the open lake, the settings, the background jobs,
who asks (and whether their role allows the route), the episode filter, the version a change
was made from (`If-Match`)."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Depends, Header, Path, Query, Request, Response

from episodelake.api.errors import Forbidden
from episodelake.api.jobs import Jobs
from episodelake.api.listing import EpisodeFilter
from episodelake.api.settings import Settings
from episodelake.lake.ops.users import Principal
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.layout import ID_MAX, ID_PATTERN
from episodelake.lake.storage.schema import Role


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

#: A step number in a path (/episodes/{episode_id}/steps/{step}...).
StepNo = Annotated[int, Path(ge=0, le=1_000_000)]
#: A caller's condition selecting steps (search, similar screens), run in the sandbox.
StepsWhere = Annotated[str | None, Query(max_length=4000, description="SQL condition over episodes e JOIN "
                                         "steps s, run in the sandbox")]

#: The episode filter, its fields as query parameters.
FilterDep = Annotated[EpisodeFilter, Query()]


# -- versions: ETag out, If-Match in ---------------------------------------------------------
#: A version's ETag: `"3"`, the row's `version` quoted (a strong validator).
_ETAG = re.compile(r'^"(\d{1,18})"$')


def etag(response: Response, row: dict) -> dict:
    """Put `row`'s version (a set, a saved view, a saved query) in the response's ETag and
    return the row."""
    response.headers["ETag"] = f'"{row["version"]}"'
    return row


def expected_version(
    if_match: Annotated[str | None, Header(
        alias="If-Match", max_length=400,
        description='the ETag a GET of this row answered (`"3"`): the change is refused with a 412 if the '
        "row was saved since; left out, the change applies to whatever version is stored (scripts; the web "
        "app always sends it)")] = None,
) -> frozenset[int] | None:
    """The versions a change was made from (If-Match's ETags), or None: any (`*`, or no header)."""
    if if_match is None or if_match.strip() == "*":
        return None
    found = [_ETAG.match(part.strip()) for part in if_match.split(",")]
    if not all(found):
        raise InvalidInput(f"If-Match: {if_match[:60]!r} is not an ETag this server gave; send the ETag "
                           'header of a GET of the row as it is (e.g. If-Match: "3"), or leave If-Match out')
    return frozenset(int(m.group(1)) for m in found if m)


#: The versions a change was made from (`If-Match`), None where it does not say.
IfMatchDep = Annotated[frozenset[int] | None, Depends(expected_version)]
