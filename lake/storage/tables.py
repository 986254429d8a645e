"""Lance datasets behind the lake's tables: creation, commits with retry, cached handles.

This module owns every call that changes a Lance dataset. Three commit kinds exist:
- `append`: new rows whose keys are known to be fresh (the recorder's steps);
- `insert_missing`: rows that may already be stored (spool replays, retried imports):
  `merge_insert` on the table's key, inserting only keys not present;
- `upsert`: rows that replace the stored row with the same key (episode updates, curation).

Concurrent writers (other processes) can make a commit conflict; commits, compactions and
index builds are retried with jittered exponential backoff, which is what Lance expects of its
callers. Only Lance's conflicts are retried; a full disk is reported as `StorageFull`.

A lake is a `Location` (a folder or an object store); every function here takes one (or a
path or URI, parsed with the variables' credentials). On an object store Lance commits with
conditional writes, so concurrent writers on many machines are safe in the same way.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import logging
import os
import random
import re
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import lance
import pyarrow as pa
import pyarrow.compute as pc
from lance.commit import CommitConflictError

from episodelake.lake.storage import layout, schema
from episodelake.lake.storage.errors import LakeError
from episodelake.lake.storage.sql import sql_string
from episodelake.lake.storage.store import Location, location, store_errors

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_COMMIT_ATTEMPTS = 12
#: Room kept on top of a write's own bytes (manifest, transaction and deletion files).
SPACE_SLACK_BYTES = 1 << 20

#: The tables each table's rows refer to. Writers commit a table's referenced tables first
#: (`COMMIT_ORDER`), and a consistent snapshot resolves tables the other way round
#: (`SNAPSHOT_ORDER`): a step seen at the snapshot's `steps` version was committed after
#: its episode row, so that row is in the `episodes` version resolved after it.
REFERENCES: dict[str, tuple[str, ...]] = {
    "steps": ("episodes",),
    "set_members": ("sets", "episodes"),
    "annotations": ("episodes", "steps"),
    "reviews": ("set_members",),
}


def _referenced_first() -> tuple[str, ...]:
    order: list[str] = []

    def visit(table: str) -> None:
        for parent in REFERENCES.get(table, ()):
            visit(parent)
        if table not in order:
            order.append(table)

    for table in schema.TABLES:
        visit(table)
    return tuple(order)


COMMIT_ORDER: tuple[str, ...] = _referenced_first()
SNAPSHOT_ORDER: tuple[str, ...] = tuple(reversed(COMMIT_ORDER))


@contextmanager
def file_lock(path: Path):
    """An exclusive advisory lock across processes (held for a short critical section)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def one_at_a_time(loc: Location, table: str):
    """Hold this machine's lock on commits to `table` that race each other: merges of one
    table conflict (Lance does not rebase one on another), and so do deletes from one
    fragment; each loser has done its whole work for nothing and starts again. With 8 writers
    on one store, a writer's episode upserts and claim deletes lost 3-20 s of races at close.
    Processes of one machine queue instead; other machines still race (and retry)."""
    return file_lock(layout.lock_path(loc, f"commit-{table}"))


def _options(loc: Location) -> dict[str, str] | None:
    return None if loc.is_local else loc.storage_options


#: In a remote lake's local folder (`layout.local_state`): the tables this machine has found
#: there with this release's columns, so a writer opening the lake again (another process,
#: a restart, an outage) asks the store nothing (`recall_tables`).
TABLES_NOTE = "tables.json"


def _schema_mark() -> str:
    """Names this release's tables and columns: a note written by another release is ignored."""
    digest = hashlib.sha256()
    for name, table_schema in schema.TABLES.items():
        digest.update(name.encode() + b"\0" + table_schema.serialize().to_pybytes())
    return digest.hexdigest()[:16]


def recall_tables(lake: Location) -> bool:
    """Take the tables this machine noted for the lake (`TABLES_NOTE`) as known; True when
    every table of the schema is among them (opening asks the store nothing then). Nothing
    is ever removed from a lake, so a table once there stays."""
    if lake.is_local:
        return False
    try:
        note = json.loads((layout.local_state(lake) / TABLES_NOTE).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(note, dict) or note.get("schema") != _schema_mark():
        return False
    lake.known_tables.update(str(t) for t in note.get("tables", []))
    return not set(schema.TABLES) - lake.known_tables


def _remember_tables(lake: Location) -> None:
    """Note the lake's known tables on this machine (see `recall_tables`); best effort."""
    if lake.is_local:
        return
    try:
        path = layout.local_state(lake) / TABLES_NOTE
        text = json.dumps({"schema": _schema_mark(), "tables": sorted(lake.known_tables)})
        if path.exists() and path.read_text() == text:
            return
        aside = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        aside.write_text(text)
        os.replace(aside, path)
    except OSError as exc:  # the next open asks the store again
        log.debug("could not note the lake's tables: %s", exc)


def existing_tables(lake: Location | Path | str) -> set[str]:
    """Names of the tables stored in the lake (one listing, not one request per table).
    The tables outside the schema found (the claims table) become `known_tables` of the
    location: they have no columns to check."""
    loc = location(lake)
    found = {name.removesuffix(".lance") for name in loc.children() if name.endswith(".lance")}
    loc.known_tables.update(found.difference(schema.TABLES))
    return found


def has_table(lake: Location, table: str) -> bool:
    """Whether `table` is in the lake, for a table outside the lake's schema (the claims
    table): once found, never asked of the store again for this `Location`
    (`Location.known_tables`)."""
    if table not in lake.known_tables:
        recall_tables(lake)  # another process of this machine may have found (or made) it
    if table not in lake.known_tables and table in existing_tables(lake):
        lake.known_tables.add(table)
        _remember_tables(lake)
    return table in lake.known_tables


def ensure_table(lake: Location, table: str, empty: pa.Table) -> None:
    """Create `table` (one outside the lake's schema) empty unless `has_table`."""
    if not has_table(lake, table):
        create_table(lake, table, empty)
        lake.known_tables.add(table)
        _remember_tables(lake)


def create_table(lake: Location | Path | str, table: str, empty: pa.Table) -> None:
    """Create `table` empty unless it exists. Processes of one machine take turns (a file
    lock); on an object store two machines creating it at once are told apart by Lance's
    conditional write of the first version, and the loser finds the table there."""
    loc = location(lake)
    path = loc / f"{table}.lance"
    with file_lock(layout.lock_path(loc, "create")), store_errors(loc):
        recall_tables(loc)  # made by another process of this machine while this one waited
        if table in loc.known_tables or table in existing_tables(loc):
            return
        try:
            lance.write_dataset(empty, str(path), enable_stable_row_ids=True, storage_options=_options(loc))
        except (OSError, ValueError):
            if table not in existing_tables(loc):
                raise
        log.info("created table %s", table)


#: Tables outside the lake's schema that a lake on an object store keeps (`claims`: `_claims`
#: and `_machines`), by name, with their columns: made with the lake's own tables, by the
#: first process that opens it. Made later by whichever writer first needs one, they were made
#: by every machine of a fleet at once: Lance turns the losers' creations into overwrites of
#: the winner's version, which could drop rows written in between.
REMOTE_TABLES: dict[str, pa.Schema] = {}


def ensure_tables(lake: Location | Path | str, stored: set[str] | None = None) -> dict[str, lance.LanceDataset]:
    """Create every missing table as an empty dataset, and give a table made by an older
    release the columns added to its schema since (null in every stored row: Lance adds them
    to the metadata only). Idempotent, safe across processes.

    `stored`: the lake's tables if the caller just listed them. Returns the tables it opened
    to check their columns, at their latest versions, for the caller to keep (a lake opens
    each table once, not once to check it and again to read it). Done once per `Location`:
    a table, once there with its columns, stays so (`Location.known_tables`)."""
    lake = location(lake)
    if not set(schema.TABLES) - lake.known_tables:
        return {}
    stored = existing_tables(lake) if stored is None else stored
    missing = [t for t in schema.TABLES if t not in stored]
    for table in missing:
        create_table(lake, table, schema.empty(table))
    if not lake.is_local:
        for table, columns in REMOTE_TABLES.items():
            if table not in stored:
                create_table(lake, table, columns.empty_table())
            lake.known_tables.add(table)
    opened = _open_tables(lake, [t for t in schema.TABLES if t not in missing])
    stale = [t for t, ds in opened.items() if _columns_missing(ds, t)]
    if stale:
        with file_lock(layout.lock_path(lake, "create")):
            for table in stale:
                retry_commit(f"add columns to {table}", functools.partial(_add_missing_columns, lake, table))
                del opened[table]  # a new version now
    lake.known_tables.update(schema.TABLES)
    _remember_tables(lake)
    return opened


def _open_tables(lake: Location, names: list[str]) -> dict[str, lance.LanceDataset]:
    """Open these tables at their latest versions, all at once on an object store: each open
    is a listing and a manifest read, so one after another they took 1 s for 14 tables on a
    store 25 ms away (the first `Recorder` a machine opens on a lake)."""
    if lake.is_local or len(names) < 2:
        return {t: open_table(lake, t) for t in names}
    with ThreadPoolExecutor(max_workers=len(names), thread_name_prefix="lake-open") as pool:
        return dict(zip(names, pool.map(functools.partial(open_table, lake), names), strict=True))


def _columns_missing(ds: lance.LanceDataset, table: str) -> list[pa.Field]:
    stored = set(ds.schema.names)
    return [f for f in schema.TABLES[table] if f.name not in stored]


def _add_missing_columns(lake: Location, table: str) -> None:
    ds = open_table(lake, table)
    fields = _columns_missing(ds, table)  # again under the lock: another process may have added them
    if fields:
        ds.add_columns(pa.schema(fields))
        log.info("table %s gained column(s) %s", table, ", ".join(f.name for f in fields))


_NOT_FOUND = re.compile(r"^Dataset at path .* was not found", re.DOTALL)


class DatasetMissing(LakeError):
    """No Lance dataset at the path opened."""


def dataset(path: Location, version: int | str | None = None) -> lance.LanceDataset:
    """The Lance dataset at `path` (a table of the lake, or the claims table). Opening it is
    how its absence is found (Lance's own listing of its versions), with no request
    beforehand to ask whether it is there."""
    with store_errors(path):
        try:
            return lance.dataset(str(path), version=version, storage_options=_options(path))
        except ValueError as exc:
            if _NOT_FOUND.match(str(exc)):  # before the store's causes: a bucket may be named "bucket"
                raise DatasetMissing(f"no dataset at {path}") from None
            raise


def open_table(lake: Location | Path | str, table: str, version: int | str | None = None) -> lance.LanceDataset:
    loc = location(lake)
    try:
        return dataset(layout.table_path(loc, table), version=version)
    except DatasetMissing:
        raise LakeError(f"table {table!r} does not exist in lake {loc}; is this a lake?") from None


def dedupe_last(table: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """Keep the last row for each key (later writes win, as in an upsert log)."""
    if table.num_rows < 2:
        return table
    idx = pa.array(range(table.num_rows), pa.int64())
    grouped = (
        table.select(list(keys))
        .append_column("__i", idx)
        .group_by(list(keys), use_threads=False)
        .aggregate([("__i", "max")])
    )
    keep = pc.sort_indices(grouped["__i_max"])
    return table.take(pc.take(grouped["__i_max"], keep))


_CONFLICT = re.compile(
    r"retryable commit conflict|commit conflict for version|too many concurrent writ"
    r"|preempted by (a )?concurrent", re.IGNORECASE)
_NO_SPACE = re.compile(r"no space left on device|os error 28\b|disk quota exceeded|os error 122\b",
                       re.IGNORECASE)


def is_commit_conflict(exc: BaseException) -> bool:
    """Whether `exc` is Lance refusing a commit because another writer committed first.

    Our operations rebuild their transaction from the latest version on every try, so both
    Lance's retryable conflicts and its "incompatible transaction" conflicts are worth a new
    try. Any other OSError (a full disk, a missing file, an I/O error) is not retried:
    matching "commit" in the text used to retry a full disk twelve times.
    """
    if isinstance(exc, CommitConflictError):
        return True
    return isinstance(exc, OSError) and _CONFLICT.search(str(exc)) is not None


class CommitContention(LakeError):
    """Concurrent writers kept winning: the operation changed nothing and can be run again."""


class StorageFull(LakeError):
    """The lake's disk has no room for what is being written; nothing was lost."""


#: Commits tried through `retry_commit` in this process, and how many of them lost a race
#: and were tried again (the remote benchmark reports conflict retries per 1,000 commits).
commit_counts = {"commits": 0, "conflict_retries": 0}


def retry_commit(what: str, fn: Callable[[], T], attempts: int = MAX_COMMIT_ATTEMPTS) -> T:
    """Run a commit (or any Lance operation that commits: compaction, index builds),
    retrying commit conflicts with jittered exponential backoff. `fn` must start from the
    latest version each time it is called."""
    delay = 0.02
    commit_counts["commits"] += 1
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except OSError as exc:
            if not is_commit_conflict(exc):
                raise
            commit_counts["conflict_retries"] += 1
            if attempt == attempts:
                raise CommitContention(
                    f"{what}: {attempts} tries lost to concurrent writers' commits ({exc}); "
                    "nothing was changed, run it again"
                ) from exc
            log.debug("%s: commit conflict (attempt %d), retrying: %s", what, attempt, exc)
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")


def free_bytes(lake: Location | Path | str) -> int:
    return shutil.disk_usage(location(lake).local).free


def require_space(lake: Location | Path | str, needed: int, what: str) -> None:
    """Refuse to start a write that cannot fit: `needed` bytes plus room for a manifest.

    Only a local lake's disk can be asked: an object store reports no free space (and
    rarely runs out), so a remote lake is never refused here. The local spool, where a
    remote lake's rows wait, has its own check (`spool.SpoolWriteError`)."""
    if not location(lake).is_local:
        return
    needed += SPACE_SLACK_BYTES
    free = free_bytes(lake)
    if free < needed:
        raise StorageFull(_full_message(lake, needed, free, what))


def raise_if_full(lake: Location | Path | str, exc: BaseException, needed: int, what: str) -> None:
    """Turn Lance's "no space left on device" into `StorageFull` saying how much is needed
    (a local lake only: see `require_space`)."""
    if not location(lake).is_local:
        return
    if _NO_SPACE.search(str(exc)) or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        raise StorageFull(_full_message(lake, needed + SPACE_SLACK_BYTES, free_bytes(lake), what)) from exc


def _full_message(lake: Location | Path | str, needed: int, free: int, what: str) -> str:
    return (f"{what} needs about {needed / 1e6:.1f} MB free on the lake's disk ({lake}); "
            f"{free / 1e6:.1f} MB are free. Nothing was lost: free some space and run "
            "`elake recover` (or open a writer) again")


#: Every this many upserts into a table, a process checks that the table's key index covers
#: all but `MAX_UNINDEXED_FRAGMENTS` of its fragments, and folds the others in when not. An
#: upsert looks its keys up: with the index an episode's upsert took 39 ms at 5,000 episodes
#: in 560 fragments, without it 216 ms (the whole key column read each time, growing with the
#: lake), and so did looking up an episode id a caller gave.
INDEX_CHECK_EVERY = 16
MAX_UNINDEXED_FRAGMENTS = 32
_upserts_since_check: dict[tuple[str, str], int] = {}
_check_lock = threading.Lock()


def commit(lake: Location | Path | str, table: str, rows: pa.Table, kind: str, *, locked: bool = False) -> None:
    """Commit `rows` to `table` as one Lance version. `kind`: append | insert_missing | upsert.
    `locked`: the caller holds the table's `one_at_a_time` lock already (a shared commit's
    leader: `group_commit.together`)."""
    if rows.num_rows == 0:
        return
    rows = rows.cast(schema.TABLES[table]) if rows.schema != schema.TABLES[table] else rows
    loc = location(lake)
    path = layout.table_path(loc, table)
    keys = list(schema.KEYS[table])
    if kind == "append":
        with store_errors(loc):
            retry_commit(f"append {table}", lambda: lance.write_dataset(
                rows, str(path), mode="append", storage_options=_options(loc)))
        return
    rows = dedupe_last(rows, schema.KEYS[table])

    def merge():
        builder = dataset(path).merge_insert(keys)
        if kind == "upsert":
            builder = builder.when_matched_update_all()
        elif kind != "insert_missing":
            raise ValueError(f"unknown commit kind {kind!r}")
        builder.when_not_matched_insert_all().execute(rows)

    with contextlib.nullcontext() if locked else one_at_a_time(loc, table), store_errors(loc):
        retry_commit(f"{kind} {table}", merge)
    if kind == "upsert":
        _count_upsert(loc, table)


#: Most keys one filter of `stored_rows` names (Lance parses the filter; a long OR chain of
#: thousands of terms parses slowly).
KEYS_PER_FILTER = 200


def _literal(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"a key value must be str or int, not {type(value).__name__}")
    return sql_string(value) if isinstance(value, str) else str(value)


def stored_rows(lake: Location | Path | str, table: str, keys: list[tuple]) -> dict[tuple, dict]:
    """The rows `table` holds now under these keys (tuples in `schema.KEYS[table]` order),
    by key; a key with no row is absent. One filtered scan per `KEYS_PER_FILTER` keys."""
    names = schema.KEYS[table]
    wanted = list(dict.fromkeys(keys))
    found: dict[tuple, dict] = {}
    ds = open_table(lake, table)
    for start in range(0, len(wanted), KEYS_PER_FILTER):
        terms = [" AND ".join(f"{n} = {_literal(v)}" for n, v in zip(names, key, strict=True))
                 for key in wanted[start:start + KEYS_PER_FILTER]]
        for row in ds.to_table(filter=" OR ".join(f"({t})" for t in terms)).to_pylist():
            found[tuple(row[n] for n in names)] = row
    return found


def _count_upsert(loc: Location, table: str) -> None:
    counter = (str(loc), table)
    with _check_lock:
        _upserts_since_check[counter] = _upserts_since_check.get(counter, 0) + 1
        if _upserts_since_check[counter] < INDEX_CHECK_EVERY:
            return
        _upserts_since_check[counter] = 0
    try:
        keep_key_index(loc, table)
    except Exception:  # the rows are committed; a lookup is only slower until the next check
        log.warning("keeping the key index of %s fresh failed; tried again after %d more upserts",
                    table, INDEX_CHECK_EVERY, exc_info=True)


def keep_key_index(lake: Location | Path | str, table: str, max_unindexed: int | None = None) -> bool:
    """Build the table's key index, or fold new fragments into it, once more than
    `max_unindexed` (default `MAX_UNINDEXED_FRAGMENTS`) fragments lie outside it; returns
    whether it did."""
    if max_unindexed is None:
        max_unindexed = MAX_UNINDEXED_FRAGMENTS
    ds = open_table(lake, table)
    name = f"{schema.KEYS[table][0]}_idx"
    fragments = {f.fragment_id for f in ds.get_fragments()}
    covered = {f for i in ds.describe_indices() if i.name == name for s in i.segments for f in s.fragment_ids}
    outside = fragments - covered
    if len(outside) <= max_unindexed:
        return False
    index_keys(lake, table)
    return True


def fragment_count(lake: Location | Path | str, table: str) -> int:
    return len(open_table(lake, table).get_fragments())


#: A table merged into again and again (episodes, curation tables) past this many fragments is
#: compacted by whoever keeps it: the API server's `AutoCompactor`, and the machine's committer
#: for the episodes a fleet merges. Each merge adds a fragment (and deletion files to the ones
#: it updates), and the next merge reads them all: on a store 25 ms away a merge of 8 episode
#: rows took 380 ms at 9 fragments, 700 ms at 50-60, and 410 ms again once compacted.
MAX_FRAGMENTS = 16


def compact(lake: Location | Path | str, table: str, above: int = 1) -> tuple[int, int]:
    """Merge small fragments (and rows deleted by upserts) into few, when the table has more
    than `above` of them (`MAX_FRAGMENTS` for a table kept compact as it is written);
    (before, after) counts, equal when it did not need to.

    Compaction is one Lance commit that concurrent writers can preempt; it is planned again
    from the latest version and retried, like any commit. The table's indexes first take in
    the rows they do not cover (`update_indexes`): Lance merges only fragments that the same
    indexes cover, so a table whose full-text index lags behind new or enriched rows would
    otherwise never compact.
    """
    before = fragment_count(lake, table)
    if before <= above:
        return before, before
    update_indexes(lake, table)
    retry_commit(f"compact {table}", lambda: open_table(lake, table).optimize.compact_files())
    return before, fragment_count(lake, table)


def update_indexes(lake: Location | Path | str, table: str) -> None:
    """Fold the rows that every index of the table does not cover yet (appended since it was
    built, or whose indexed column was rewritten by `updates.update_columns`) into it, so a
    search reads them from the index instead of a flat scan beside it."""
    def fold() -> None:
        ds = open_table(lake, table)
        if ds.describe_indices():
            ds.optimize.optimize_indices()

    retry_commit(f"update the indexes of {table}", fold)


def has_index(ds: lance.LanceDataset, name: str) -> bool:
    """Whether `ds` has an index called `name`."""
    return any(i.name == name for i in ds.describe_indices())


def index_keys(lake: Location | Path | str, table: str) -> None:
    """Build the BTREE index on the table's first key column where it is missing, then fold
    new rows into every index of the table (`update_indexes`)."""
    key = schema.KEYS[table][0]

    def build() -> None:
        ds = open_table(lake, table)
        if ds.count_rows() and not has_index(ds, f"{key}_idx"):
            ds.create_scalar_index(key, "BTREE", name=f"{key}_idx", replace=True)

    retry_commit(f"index {table}.{key}", build)
    update_indexes(lake, table)


def prune(lake: Location | Path | str, table: str, older_than: timedelta) -> int:
    """Remove untagged versions older than `older_than`; returns how many went."""
    def cleanup() -> int:
        stats = open_table(lake, table).cleanup_old_versions(
            older_than=older_than, error_if_tagged_old_versions=False)
        return stats.old_versions

    return int(retry_commit(f"prune {table}", cleanup))
