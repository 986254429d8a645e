"""Lance datasets behind the lake's tables: creation, commits with retry, cached handles.

This module owns every call that changes a Lance dataset. Three commit kinds exist:
- `append`: new rows whose keys are known to be fresh (the recorder's steps);
- `insert_missing`: rows that may already be stored (spool replays, retried imports):
  `merge_insert` on the table's key, inserting only keys not present;
- `upsert`: rows that replace the stored row with the same key (episode updates, curation).

Concurrent writers (other processes) can make a commit conflict; commits are retried with
jittered exponential backoff, which is what Lance expects of its callers.
"""

from __future__ import annotations

import fcntl
import logging
import random
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc

from episodelake.lake import layout, schema
from episodelake.lake.errors import LakeError

log = logging.getLogger(__name__)

MAX_COMMIT_ATTEMPTS = 12


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


def ensure_tables(lake: Path) -> None:
    """Create every missing table as an empty dataset (idempotent, safe across processes)."""
    missing = [t for t in schema.TABLES if not layout.table_path(lake, t).exists()]
    if not missing:
        return
    with file_lock(layout.lock_path(lake, "create")):
        for table in missing:
            path = layout.table_path(lake, table)
            if path.exists():
                continue
            lance.write_dataset(schema.empty(table), str(path), enable_stable_row_ids=True)
            log.info("created table %s", table)


def open_table(lake: Path, table: str, version: int | str | None = None) -> lance.LanceDataset:
    path = layout.table_path(lake, table)
    if not path.exists():
        raise LakeError(f"table {table!r} does not exist in lake {lake}; is this a lake folder?")
    return lance.dataset(str(path), version=version)


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


def retry_commit(what: str, fn: Callable[[], object]) -> object:
    """Run a commit, retrying Lance's commit conflicts with jittered exponential backoff."""
    delay = 0.02
    for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
        try:
            return fn()
        except OSError as exc:  # Lance reports commit conflicts as OSError/IOError
            text = str(exc).lower()
            retryable = any(w in text for w in ("conflict", "retryable", "concurrent", "commit"))
            if not retryable or attempt == MAX_COMMIT_ATTEMPTS:
                raise
            log.debug("%s: commit conflict (attempt %d), retrying: %s", what, attempt, exc)
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")


def commit(lake: Path, table: str, rows: pa.Table, kind: str) -> None:
    """Commit `rows` to `table` as one Lance version. `kind`: append | insert_missing | upsert."""
    if rows.num_rows == 0:
        return
    rows = rows.cast(schema.TABLES[table]) if rows.schema != schema.TABLES[table] else rows
    uri = str(layout.table_path(lake, table))
    keys = list(schema.KEYS[table])
    if kind == "append":
        retry_commit(f"append {table}", lambda: lance.write_dataset(rows, uri, mode="append"))
        return
    rows = dedupe_last(rows, schema.KEYS[table])

    def merge():
        builder = lance.dataset(uri).merge_insert(keys)
        if kind == "upsert":
            builder = builder.when_matched_update_all()
        elif kind != "insert_missing":
            raise ValueError(f"unknown commit kind {kind!r}")
        builder.when_not_matched_insert_all().execute(rows)

    retry_commit(f"{kind} {table}", merge)
