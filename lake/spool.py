"""The write-ahead spool: rows a writer acknowledged but has not yet committed to Lance.

Each live writer owns a folder `_spool/<writer_id>/` and holds an flock on its `lock` file for
as long as it lives. Rows go to Arrow IPC stream segments, one per table and sequence number;
once a segment's rows are committed to Lance the segment is deleted. A folder whose lock can
be taken belongs to a writer that died: its segments are replayed (with the table key making
the replay idempotent) and the folder is removed.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from episodelake.lake import layout, schema

log = logging.getLogger(__name__)


class Segment:
    """One IPC stream of single-table rows; appends are flushed (and fsynced if asked)."""

    def __init__(self, path: Path, table: str, fsync: bool):
        self.path = path
        self.table = table
        self.fsync = fsync
        self._fh = open(path, "wb")
        self._writer = ipc.new_stream(self._fh, schema.TABLES[table])
        self.rows = 0

    def append(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)
        self._fh.flush()
        if self.fsync:
            os.fsync(self._fh.fileno())
        self.rows += batch.num_rows

    def close(self) -> None:
        if not self._fh.closed:
            self._writer.close()
            self._fh.close()

    def discard(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class Spool:
    """A live writer's spool folder (locked for the writer's lifetime)."""

    def __init__(self, lake: Path, fsync: bool = False):
        self.writer_id = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        root = layout.spool_root(lake)
        # Built under a hidden name, locked, then renamed: another writer scanning for dead
        # writers' folders never sees this one without its lock held.
        staging = root / f".{self.writer_id}"
        staging.mkdir(parents=True)
        self._lock = open(staging / layout.SPOOL_LOCK, "w")
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.dir = root / self.writer_id
        staging.rename(self.dir)
        self.fsync = fsync
        self._seq = 0

    def new_segment(self, table: str) -> Segment:
        self._seq += 1
        return Segment(self.dir / f"{table}-{self._seq:08d}{layout.SPOOL_SUFFIX}", table, self.fsync)

    def close(self) -> None:
        """Remove the folder; only call once every segment has been committed."""
        leftover = list(self.dir.glob(f"*{layout.SPOOL_SUFFIX}"))
        if leftover:
            log.warning("spool %s keeps %d uncommitted segment(s) for replay", self.dir, len(leftover))
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        self._lock.close()


def read_segment(path: Path) -> tuple[pa.Table, bool]:
    """Read every complete batch of a segment. Returns (rows, whether the tail was torn).

    A writer killed mid-append leaves a partial last message; that row was never
    acknowledged, so it is dropped and the rest kept.
    """
    table = path.name.rsplit("-", 1)[0]
    batches: list[pa.RecordBatch] = []
    torn = False
    try:
        with ipc.open_stream(pa.memory_map(str(path))) as reader:
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
    except (pa.ArrowInvalid, OSError, EOFError):
        torn = True
    return pa.Table.from_batches(batches, schema=schema.TABLES[table]), torn


def orphaned(lake: Path) -> Iterator[tuple[Path, object]]:
    """Yield (folder, held lock) for spool folders whose writer is gone.

    The caller replays the folder while holding the lock, then calls `release(folder, lock)`.
    """
    root = layout.spool_root(lake)
    if not root.exists():
        return
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            fh = open(folder / layout.SPOOL_LOCK)  # never created here: only writers create locks
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()  # a live writer
            continue
        if not folder.exists():
            fh.close()
            continue
        yield folder, fh


def segments(folder: Path) -> list[Path]:
    """Segments in write order (the sequence number is shared by all tables of a writer)."""
    return sorted(folder.glob(f"*{layout.SPOOL_SUFFIX}"), key=lambda p: p.stem.rsplit("-", 1)[1])


def release(folder: Path, lock) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    lock.close()
