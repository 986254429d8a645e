"""Saved SQL queries: named queries the whole team sees in the SQL console, each with its
owner. Anyone who may change the lake's shared state saves one; its owner (or an admin)
deletes it. A deleted query keeps its row (`deleted` set), as saved views do, and every
change is an audit row. The query text is stored as typed: it runs, like any query, in the
sandbox when someone opens it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from episodelake.lake.core import audit, layout
from episodelake.lake.core.errors import Conflict, NotAllowed, NotFound
from episodelake.lake.core.lake import Lake
from episodelake.lake.curation.fields import MAX_NAME, required_text

#: The longest query saved (the SQL console's own limit).
MAX_QUERY = 20_000


def list_queries(lake: Lake) -> list[dict]:
    """Live saved queries, by name."""
    return lake.sql("SELECT * FROM saved_queries WHERE NOT coalesce(deleted, false) ORDER BY name, query_id").to_pylist()


def save(lake: Lake, name: str, query: str, *, owner: str | None) -> dict:
    """Save `query` under `name`, which no other live saved query has."""
    name = required_text(name, "name", MAX_NAME)
    query = required_text(query, "query", MAX_QUERY)
    taken = [q for q in list_queries(lake) if q["name"] == name]
    if taken:
        raise Conflict(f"name: a saved query named {name!r} exists (owner {taken[0]['owner'] or 'unknown'}); "
                       "pick another name")
    query_id = f"q-{uuid.uuid4().hex[:12]}"
    row = {"query_id": query_id, "name": name, "query": query, "owner": owner,
           "created_at": datetime.now(UTC), "deleted": False}
    lake.upsert("saved_queries", [row])
    audit.record(lake, owner, "query.save", "saved_queries", query_id, None, row)
    return row


def delete(lake: Lake, query_id: str, *, who: str | None, admin: bool) -> None:
    """Delete a saved query: its owner may, and an admin (`admin`); on a lake without users
    (`who` None) anyone may."""
    layout.check_id(query_id, "query_id")
    rows = [q for q in list_queries(lake) if q["query_id"] == query_id]
    if not rows:
        raise NotFound(f"saved query {query_id!r} does not exist (or was deleted)")
    row = rows[0]
    if who is not None and not admin and row["owner"] != who:
        raise NotAllowed(f"saved query {row['name']!r} is {row['owner'] or 'nobody'}'s: only its owner or an "
                           "admin deletes it")
    lake.upsert("saved_queries", [{**row, "deleted": True}])
    audit.record(lake, who, "query.delete", "saved_queries", query_id, row, None)

