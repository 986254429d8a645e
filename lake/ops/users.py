"""People and roles: who may use a served lake, and what each may do.

`add` makes a user with a role (`schema.ROLES`: viewer < curator < admin, each allowed what
the ones before it are) and returns their token once: only its SHA-256 is stored, in the
`users` table, whose hash column no SQL query sees (`schema.SECRET_COLUMNS`). Tokens are 32
random bytes, so the hash cannot be guessed back and a plain hash suffices.

While the lake has no users, a server bound to loopback stays open as before (its own
token, when set, still guards it). Once any user exists the server requires a user's token
on every request, loopback included (`episodelake.api.security`). The rules of who may do
what are the server's; this module only stores people and checks tokens.

A removed user keeps their row (`removed` set), so names in the audit log and in
`added_by` keep meaning someone; a name once removed can be added again with a new token.
A user's role can be changed (`change_role`) and their token replaced (`reissue`: the old one
stops working) without removing them. The last admin cannot be removed, nor made anything
else, while others remain: someone must be able to manage them. Every change is an audit row
(`user.add`, `user.remove`, `user.role`, `user.reissue`), the token hash never in it.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from episodelake.lake.ops import audit
from episodelake.lake.storage import layout, schema
from episodelake.lake.storage.errors import Conflict, InvalidInput, NotFound

#: Tokens start with this, so one found in a log or a paste is recognisable.
TOKEN_PREFIX = "elk_"
#: How long a server trusts its copy of the users table: a user added or removed from the
#: command line is known to a running server after at most this long.
REFRESH_S = 2.0


@dataclass(frozen=True)
class Principal:
    """Who makes a request, and their role."""

    name: str
    role: schema.Role

    def may(self, role: schema.Role) -> bool:
        """Whether this person's role includes `role`."""
        return schema.ROLES.index(self.role) >= schema.ROLES.index(role)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _check_role(role: object) -> schema.Role:
    if role not in schema.ROLES:
        raise InvalidInput(f"role must be one of {', '.join(schema.ROLES)}, not {role!r}")
    return role


def _stored(lake) -> list[dict]:
    """Every users row, hashes included (read from Lance: SQL never shows the hash)."""
    return _stored_at(lake)[1]


def _stored_at(lake) -> tuple[int, list[dict]]:
    """(the users table's version, its rows), read at its latest version."""
    lake.invalidate("users")
    ds = lake.dataset("users")
    return ds.version, ds.to_table().to_pylist()


def _public(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "token_sha256"}


def list_users(lake) -> list[dict]:
    """Live users by name, without their token hashes."""
    return sorted((_public(r) for r in _stored(lake) if not r["removed"]), key=lambda r: r["name"])


def add(lake, name: str, role: str, *, by: str | None = None) -> tuple[dict, str]:
    """Make user `name` with `role`; returns (their row, their token). The token is not
    kept anywhere: whoever adds the user hands it over."""
    layout.check_id(name, "name")
    role = _check_role(role)
    current = {r["name"]: r for r in _stored(lake)}
    if name in current and not current[name]["removed"]:
        raise Conflict(f"user {name!r} exists (role {current[name]['role']}); remove them first to "
                       "issue a new token or change the role")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = {"name": name, "role": role, "token_sha256": token_hash(token), "created_at": datetime.now(UTC),
           "created_by": by, "removed": False}
    lake.upsert("users", [row])
    audit.record(lake, by, "user.add", "users", name, _public(current[name]) if name in current else None,
                 _public(row))
    return _public(row), token


def _live(lake, name: str) -> dict[str, dict]:
    """The live users by name; NotFound naming them unless `name` is one."""
    layout.check_id(name, "name")
    live = {r["name"]: r for r in _stored(lake) if not r["removed"]}
    if name not in live:
        raise NotFound(f"no user {name!r}; users: {', '.join(sorted(live)) or 'none'}")
    return live


def _check_not_last_admin(live: dict[str, dict], name: str, doing: str) -> None:
    admins = [n for n, r in live.items() if r["role"] == "admin"]
    if admins == [name] and len(live) > 1:
        raise Conflict(f"{name!r} is the last admin, so cannot be {doing}: make another user an admin first "
                       "(`elake user add NAME --role admin`), or remove the other users")


def remove(lake, name: str, *, by: str | None = None) -> dict:
    """Remove user `name`: their token stops working (on a running server within REFRESH_S)."""
    live = _live(lake, name)
    _check_not_last_admin(live, name, "removed")
    row = {**live[name], "removed": True}
    lake.upsert("users", [row])
    audit.record(lake, by, "user.remove", "users", name, _public(live[name]), _public(row))
    return _public(row)


def change_role(lake, name: str, role: str, *, by: str | None = None) -> dict:
    """Give user `name` another role; their token stays (a running server knows the new role
    within REFRESH_S)."""
    role = _check_role(role)
    live = _live(lake, name)
    if role != "admin":
        _check_not_last_admin(live, name, f"made a {role}")
    row = {**live[name], "role": role}
    lake.upsert("users", [row])
    audit.record(lake, by, "user.role", "users", name, _public(live[name]), _public(row))
    return _public(row)


def reissue(lake, name: str, *, by: str | None = None) -> tuple[dict, str]:
    """Give user `name` a new token, returned once; the old one stops working (a lost or
    leaked token). The audit row says it was reissued, never the token or its hash."""
    live = _live(lake, name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = {**live[name], "token_sha256": token_hash(token)}
    lake.upsert("users", [row])
    audit.record(lake, by, "user.reissue", "users", name, _public(live[name]), _public(row))
    return _public(row), token


class Directory:
    """A server's view of the users table: token -> person, re-read at most every REFRESH_S.

    Reads are a Lance scan of a tiny table; the cache keeps one per request from costing
    one. Thread-safe: requests run on many threads."""

    def __init__(self, lake, refresh_s: float = REFRESH_S):
        self.lake = lake
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self._version = -1
        self._by_hash: dict[str, Principal] = {}

    def _current(self, *, unless_unchanged: bool = False) -> dict[str, Principal]:
        """The copy, re-read if older than `refresh_s`; with `unless_unchanged`, re-read at
        once unless the table's version is still the one read (a manifest check)."""
        with self._lock:
            stale = time.monotonic() - self._read_at >= self.refresh_s
            if unless_unchanged and not stale:
                self.lake.invalidate("users")
                stale = self.lake.dataset("users").version != self._version
            if stale:
                self._version, rows = _stored_at(self.lake)
                self._by_hash = {r["token_sha256"]: Principal(r["name"], r["role"])
                                 for r in rows if not r["removed"] and r["token_sha256"]}
                self._read_at = time.monotonic()
            return self._by_hash

    def fresh(self) -> dict[str, Principal] | None:
        """The copy (token hash -> person) when it is younger than `refresh_s`, else None:
        what a server's event loop may ask without reading the lake (no thread hop)."""
        with self._lock:
            return self._by_hash if time.monotonic() - self._read_at < self.refresh_s else None

    def any(self) -> bool:
        """Whether the lake has users (then every request must name one)."""
        return bool(self._current())

    def authenticate(self, token: str) -> Principal | None:
        """The person whose token this is (a lookup by the token's hash: timing it tells an
        attacker nothing about any token). A token not in the copy re-reads the table if it
        changed since, so a user just added signs in at once; a wrong token costs a version
        check, not a read."""
        presented = token_hash(token)
        found = self._current().get(presented)
        return found if found is not None else self._current(unless_unchanged=True).get(presented)
