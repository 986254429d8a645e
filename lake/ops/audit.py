"""The audit log: who changed the lake's shared state, when, and what it was before and after.

Curation (sets, members, notes, labels, saved views), users and edits write one `audit` row
per change (`schema.Audit`), right after the change's own commit: `who` is the signed-in
user on a served lake, the operating-system user from the command line, null where neither
is known. A change about an episode names it (`episode_id`), so `elake purge` removes its
audit rows with the episode's other rows. A row is never updated, so the log reads the same in every later version; SQL
reads it as any table (`SELECT * FROM audit ORDER BY changed_at DESC`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import InvalidInput

#: Most rows one listing returns.
MAX_LIST = 1000


def _json(row: Mapping[str, Any] | None) -> str | None:
    return None if row is None else json.dumps(dict(row), ensure_ascii=False, sort_keys=True, default=str)


def entry(who: str | None, action: str, table: str, key: str, before: Mapping[str, Any] | None,
          after: Mapping[str, Any] | None, *, episode_id: str | None = None) -> dict:
    """One `audit` row (not yet written). `episode_id` names the episode the change concerns,
    so purging the episode removes its changes' rows too (notes and labels live in them)."""
    if table not in schema.TABLES:
        raise InvalidInput(f"audit: unknown table {table!r}")
    return {"audit_id": f"aud-{uuid.uuid4().hex[:16]}", "changed_at": datetime.now(UTC), "who": who,
            "action": action, "target_table": table, "target_id": key, "episode_id": episode_id,
            "before": _json(before), "after": _json(after)}


def record(lake, who: str | None, action: str, table: str, key: str, before: Mapping[str, Any] | None,
           after: Mapping[str, Any] | None, *, episode_id: str | None = None) -> dict:
    """Write one audit row (one commit) and return it. `lake` is a writable `Lake` (typed
    loosely: `lake.storage.lake` imports nothing from here)."""
    row = entry(who, action, table, key, before, after, episode_id=episode_id)
    lake.insert("audit", [row])
    return row


def record_many(lake, rows: list[dict]) -> None:
    """Write `entry` rows in one commit."""
    if rows:
        lake.insert("audit", rows)


def listing(lake, *, who: str | None = None, target_id: str | None = None, limit: int = 100) -> list[dict]:
    """The newest changes first, optionally only one person's, or one row's and its parts'
    (`target_id` a set's id: the set's changes and its members')."""
    if not 1 <= limit <= MAX_LIST:
        raise InvalidInput(f"limit must be 1..{MAX_LIST}, not {limit}")
    where, params = [], []
    if who is not None:
        where.append("who = ?")
        params.append(who)
    if target_id is not None:  # the row's own changes and its parts' (a set's members: SET/EPISODE)
        where.append("(target_id = ? OR starts_with(target_id, ?))")
        params += [target_id, target_id + "/"]
    condition = f"WHERE {' AND '.join(where)}" if where else ""
    rows = lake.sql(f"SELECT * FROM audit {condition} ORDER BY changed_at DESC, audit_id LIMIT {int(limit)}",
                    params).to_pylist()
    for row in rows:
        for side in ("before", "after"):
            row[side] = None if row[side] is None else json.loads(row[side])
    return rows
