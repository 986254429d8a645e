"""Versions of what people edit by hand: sets, saved views and saved queries.

Two people editing one set must not overwrite each other without knowing: a save names the
version it was made from, and a save made from an older version than the stored one is
refused (`StaleVersion`, a 412 in the API) with who saved the newer one and when, so the
editor can merge and save again.

A row's version is the number of audit rows about it (`audit.target_table` and
`target_id`): every change of a set's, a view's or a saved query's own fields writes exactly
one (`set.create`, `set.update`, `view.assign`, `query.update`, ...), and the newest says
who made it and when. So the version needs no column of its own, older lakes have one
(0 for a row made before the audit log), and it never moves for changes the row does not
hold: a set's members are rows of `set_members`, so filing an episode is not a new version of
the set. The check and the write it guards run under the curation module's write lock
(one at a time within a server); a second server on the same lake writing the same row in
the same instant is the one case it does not see.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from datetime import datetime

from episodelake.lake.storage.errors import Conflict

#: What a listing joins to give each row its `version`, `changed_by` and `changed_at`:
#: `versions_of('sets')` is a subquery keyed by `target_id`.
_VERSIONS = """(SELECT target_id, count(*) AS version, arg_max(who, changed_at) AS changed_by,
                       max(changed_at) AS changed_at
                FROM audit WHERE target_table = '{table}' GROUP BY target_id)"""

#: Held while a versioned row is read, checked and written back (and while a name is checked
#: free before one is made): one such change at a time within this process.
write_lock = threading.Lock()

#: The tables whose rows carry a version.
VERSIONED = ("sets", "saved_views", "saved_queries")


def versions_of(table: str) -> str:
    """The subquery of `table`'s versions (one of `VERSIONED`), to LEFT JOIN on `target_id`."""
    if table not in VERSIONED:
        raise ValueError(f"{table!r} has no versions; versioned tables: {VERSIONED}")
    return _VERSIONS.format(table=table)


def columns(alias: str = "v") -> str:
    """The version columns of a row joined with `versions_of` as `alias`."""
    return (f"coalesce({alias}.version, 0)::BIGINT AS version, {alias}.changed_by AS changed_by, "
            f"{alias}.changed_at AS changed_at")


class StaleVersion(Conflict):
    """A save made from an older version of a set, view or saved query than the stored one."""


def _when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S UTC") if at is not None else "an unknown time"


def check(what: str, current: dict, expected: Collection[int] | None) -> None:
    """Refuse a change of `current` (a row with `version`, `changed_by`, `changed_at`) made
    from a version not in `expected`; `None` (no version named: the command line, a script)
    lets it through."""
    if expected is None or current["version"] in expected:
        return
    sent = ", ".join(str(v) for v in sorted(expected))
    raise StaleVersion(
        f"{what} was changed by {current['changed_by'] or 'someone unknown'} at {_when(current['changed_at'])} "
        f"(now version {current['version']}; this change was made from version {sent}): open it again, "
        "merge your changes with theirs, and save")
