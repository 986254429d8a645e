"""People and the audit log: GET /api/me, /api/users (adding, removing, changing a role and
reissuing a token are an admin's), GET /api/audit.

Users are stored in the lake (`episodelake.lake.ops.users`), so `elake user add` on the
command line and POST /api/users here make the same people; a running server knows of a
change within `users.REFRESH_S`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from episodelake.api.deps import IdPath, LakeDep, PersonDep, needs
from episodelake.api.models import AuditEntry, Me, UserCreate, UserCreated, UserOut, UserUpdate
from episodelake.lake.ops import audit, users

router = APIRouter(tags=["people"])


@router.get("/me", response_model=Me)
def me(user: PersonDep) -> Me:
    """Who the server takes the caller for; on a server that needs no token, anyone on this
    machine is an unnamed admin."""
    if user is None:
        return Me(name=None, role="admin", sign_in=False)
    return Me(name=user.name, role=user.role, sign_in=True)


@router.get("/users", response_model=list[UserOut])
def list_users(lake: LakeDep) -> list[dict]:
    """The lake's people and their roles (anyone signed in may see who is on the team, to
    assign a set to someone; only admins change them)."""
    return users.list_users(lake)


@router.post("/users", response_model=UserCreated, status_code=201, openapi_extra=needs("admin"))
def add_user(lake: LakeDep, user: PersonDep, body: UserCreate) -> dict:
    """Make a user; the answer holds their token, which is shown this once."""
    row, token = users.add(lake, body.name, body.role, by=user.name if user else None)
    return {**row, "token": token}


@router.delete("/users/{name}", status_code=204, response_class=Response, openapi_extra=needs("admin"))
def remove_user(lake: LakeDep, user: PersonDep, name: IdPath) -> Response:
    users.remove(lake, name, by=user.name if user else None)
    return Response(status_code=204)


@router.patch("/users/{name}", response_model=UserOut, openapi_extra=needs("admin"))
def change_role(lake: LakeDep, user: PersonDep, name: IdPath, body: UserUpdate) -> dict:
    """Give a user another role (their token stays); the last admin stays an admin (409)."""
    return users.change_role(lake, name, body.role, by=user.name if user else None)


@router.post("/users/{name}/token", response_model=UserCreated, openapi_extra=needs("admin"))
def reissue_token(lake: LakeDep, user: PersonDep, name: IdPath) -> dict:
    """Give a user a new token, shown this once; their old token stops working."""
    row, token = users.reissue(lake, name, by=user.name if user else None)
    return {**row, "token": token}


@router.get("/audit", response_model=list[AuditEntry])
def audit_log(lake: LakeDep,
              who: Annotated[str | None, Query(max_length=200, description="only this person's changes")] = None,
              target_id: Annotated[str | None, Query(max_length=500, description="only changes of this row "
                                                     "and its parts (its key; a set's id also "
                                                     "lists its members', SET_ID/EPISODE_ID)")] = None,
              limit: Annotated[int, Query(ge=1, le=audit.MAX_LIST)] = 100) -> list[dict]:
    """Changes to sets, members, notes, labels, views, users and episodes: newest first."""
    return audit.listing(lake, who=who, target_id=target_id, limit=limit)
