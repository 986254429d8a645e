"""Saved SQL queries: named queries the whole team sees in the SQL console, each with its
owner. Anyone who may change the lake's shared state saves one; its owner (or an admin)
renames, rewrites or deletes it. A deleted query keeps its row (`deleted` set), as saved views
do, and every change is an audit row, which also gives each query its version
(`episodelake.lake.curation.versions`): a change made from an older version than the stored
one is refused, naming who saved the newer one. The query text is stored as typed: it runs,
like any query, in the sandbox when someone opens it.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import UTC, datetime

from episodelake.lake.curation import versions
from episodelake.lake.curation.fields import MAX_NAME, required_text
from episodelake.lake.ops import audit
from episodelake.lake.storage import layout, schema
from episodelake.lake.storage.errors import Conflict, NotAllowed, NotFound
from episodelake.lake.storage.lake import Lake

#: The longest query saved (the SQL console's own limit).
MAX_QUERY = 20_000

_QUERY = f"""
    SELECT q.*, {versions.columns("v")}
    FROM saved_queries q LEFT JOIN {versions.versions_of("saved_queries")} v ON v.target_id = q.query_id
    WHERE NOT coalesce(q.deleted, false) {{extra}} ORDER BY q.name, q.query_id
"""


def list_queries(lake: Lake) -> list[dict]:
    """Live saved queries, by name, each with its version."""
    return lake.sql(_QUERY.format(extra="")).to_pylist()


def get(lake: Lake, query_id: str) -> dict:
    """A live saved query with its version, or NotFound."""
    layout.check_id(query_id, "query_id")
    rows = lake.sql(_QUERY.format(extra="AND q.query_id = ?"), [query_id]).to_pylist()
    if not rows:
        raise NotFound(f"saved query {query_id!r} does not exist (or was deleted)")
    return rows[0]


def _stored(row: dict) -> dict:
    """A query as `get` gives it, in its stored form (no version)."""
    return {k: row[k] for k in schema.SAVED_QUERIES.names}


def _check_name_free(lake: Lake, name: str, except_id: str | None = None) -> None:
    taken = [q for q in list_queries(lake) if q["name"] == name and q["query_id"] != except_id]
    if taken:
        raise Conflict(f"name: a saved query named {name!r} exists (owner {taken[0]['owner'] or 'unknown'}); "
                       "pick another name")


def _check_may_change(row: dict, who: str | None, admin: bool, doing: str) -> None:
    """Its owner may change a saved query, and an admin (`admin`); on a lake without users
    (`who` None) anyone may."""
    if who is not None and not admin and row["owner"] != who:
        raise NotAllowed(f"saved query {row['name']!r} is {row['owner'] or 'nobody'}'s: only its owner or an "
                         f"admin {doing} it")


def save(lake: Lake, name: str, query: str, *, owner: str | None) -> dict:
    """Save `query` under `name`, which no other live saved query has."""
    name = required_text(name, "name", MAX_NAME)
    query = required_text(query, "query", MAX_QUERY)
    with versions.write_lock:
        _check_name_free(lake, name)
        query_id = f"q-{uuid.uuid4().hex[:12]}"
        row = {"query_id": query_id, "name": name, "query": query, "owner": owner,
               "created_at": datetime.now(UTC), "deleted": False}
        lake.upsert("saved_queries", [row])
        audit.record(lake, owner, "query.save", "saved_queries", query_id, None, row)
    return get(lake, query_id)


def update(lake: Lake, query_id: str, *, who: str | None, admin: bool, name: str | None = None,
           query: str | None = None, expected_version: Collection[int] | None = None) -> dict:
    """Rename a saved query or replace its text (its owner's or an admin's to change, as
    `delete`); with `expected_version`, a query saved since by someone else is refused
    (`versions.StaleVersion`). The audit row `query.update` holds it before and after."""
    with versions.write_lock:
        current = get(lake, query_id)
        _check_may_change(current, who, admin, "changes")
        versions.check(f"saved query {current['name']!r}", current, expected_version)
        row = _stored(current)
        if name is not None:
            row["name"] = required_text(name, "name", MAX_NAME)
            _check_name_free(lake, row["name"], except_id=query_id)
        if query is not None:
            row["query"] = required_text(query, "query", MAX_QUERY)
        lake.upsert("saved_queries", [row])
        audit.record(lake, who, "query.update", "saved_queries", query_id, _stored(current), row)
    return get(lake, query_id)


def delete(lake: Lake, query_id: str, *, who: str | None, admin: bool,
           expected_version: Collection[int] | None = None) -> None:
    """Delete a saved query: its owner may, and an admin (`admin`); on a lake without users
    (`who` None) anyone may."""
    with versions.write_lock:
        current = get(lake, query_id)
        _check_may_change(current, who, admin, "deletes")
        versions.check(f"saved query {current['name']!r}", current, expected_version)
        row = _stored(current)
        lake.upsert("saved_queries", [{**row, "deleted": True}])
        audit.record(lake, who, "query.delete", "saved_queries", query_id, row, None)
