"""LakeWriter: crash-safe, batched writes into the lake from any number of processes.

`append(table, row)` returns only once the row is in this writer's spool (so a crash after
it returns loses nothing) and in an in-memory batch. Batches go to Lance as one commit per
many rows, when they reach `batch_rows` rows or `batch_bytes` bytes, or are `max_age_s` old
(a background thread watches age). Opening a writer first replays spools left by writers
that died; the table keys make replays idempotent.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from episodelake.lake import schema, spool, tables

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriterOptions:
    batch_rows: int = 512
    batch_bytes: int = 128 * 1024 * 1024
    max_age_s: float = 2.0
    #: "process": flushed to the OS on every append (survives the process being killed);
    #: "machine": also fsynced (survives power loss), slower.
    durability: str = "process"
    #: Steps whose keys may already be stored (imports, replays) are merged, not appended.
    dedupe_steps: bool = False

    def __post_init__(self):
        if self.durability not in ("process", "machine"):
            raise ValueError(f"durability must be 'process' or 'machine', not {self.durability!r}")
        if self.batch_rows < 1 or self.max_age_s <= 0:
            raise ValueError("batch_rows must be >= 1 and max_age_s > 0")


class _Pending:
    """Rows of one table waiting for a commit, and the spool segment that holds them."""

    def __init__(self, segment: spool.Segment):
        self.segment = segment
        self.batches: list[pa.RecordBatch] = []
        self.bytes = 0
        self.since = time.monotonic()


def replay_orphans(lake: Path) -> int:
    """Commit the rows of every dead writer's spool; returns the number of rows replayed."""
    replayed = 0
    for folder, lock in spool.orphaned(lake):
        for path in spool.segments(folder):
            rows, torn = spool.read_segment(path)
            table = path.name.rsplit("-", 1)[0]
            if torn:
                log.warning("spool segment %s ends in a torn write; its last row was never acknowledged", path)
            kind = "insert_missing" if table in schema.APPEND_ONLY else "upsert"
            tables.commit(lake, table, rows, kind)
            replayed += rows.num_rows
            path.unlink()
        spool.release(folder, lock)
        log.info("replayed spool %s", folder.name)
    return replayed


class LakeWriter:
    def __init__(self, lake: Path | str, options: WriterOptions | None = None):
        self.lake = Path(lake)
        self.options = options or WriterOptions()
        tables.ensure_tables(self.lake)
        self.replayed = replay_orphans(self.lake)
        self._spool = spool.Spool(self.lake, fsync=self.options.durability == "machine")
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()  # guards _pending
        self._commit_lock = threading.Lock()  # one commit at a time, in order
        self._closed = False
        self._error: BaseException | None = None
        self.commits = 0
        self._stop = threading.Event()
        self._ager = threading.Thread(target=self._age_loop, name="lake-writer-age", daemon=True)
        self._ager.start()

    # -- appending ---------------------------------------------------------------------
    def append(self, table: str, row: dict) -> None:
        self.append_rows(table, [row])

    def append_rows(self, table: str, rows: list[dict]) -> None:
        if self._closed:
            raise RuntimeError("this LakeWriter is closed")
        if self._error is not None:
            raise RuntimeError(f"a background commit failed: {self._error}") from self._error
        batch = schema.conform(table, rows).to_batches()
        due = False
        with self._lock:
            pending = self._pending.get(table)
            if pending is None:
                pending = self._pending[table] = _Pending(self._spool.new_segment(table))
            for b in batch:
                pending.segment.append(b)
                pending.batches.append(b)
                pending.bytes += b.nbytes
            due = (
                pending.segment.rows >= self.options.batch_rows
                or pending.bytes >= self.options.batch_bytes
            )
        if due:
            self._commit(only=table)

    # -- committing --------------------------------------------------------------------
    def flush(self) -> None:
        """Commit everything appended so far."""
        self._commit(only=None)
        if self._error is not None:
            raise RuntimeError(f"a background commit failed: {self._error}") from self._error

    def _take(self, only: str | None, older_than: float | None = None) -> dict[str, _Pending]:
        with self._lock:
            now = time.monotonic()
            taken = {
                t: p
                for t, p in self._pending.items()
                if (only is None or t == only) and (older_than is None or now - p.since >= older_than)
            }
            for t in taken:
                del self._pending[t]
            return taken

    def _commit(self, only: str | None, older_than: float | None = None) -> None:
        with self._commit_lock:
            taken = self._take(only, older_than)
            # episodes before steps: a reader that sees a step can always find its episode
            for table in sorted(taken, key=lambda t: t != "episodes"):
                pending = taken[table]
                rows = pa.Table.from_batches(pending.batches, schema=schema.TABLES[table])
                if table in schema.APPEND_ONLY:
                    kind = "insert_missing" if self.options.dedupe_steps else "append"
                else:
                    kind = "upsert"
                tables.commit(self.lake, table, rows, kind)
                self.commits += 1
                pending.segment.discard()

    def _age_loop(self) -> None:
        interval = min(self.options.max_age_s / 2, 0.5)
        while not self._stop.wait(interval):
            try:
                self._commit(only=None, older_than=self.options.max_age_s)
            except BaseException as exc:  # surfaced on the next append/flush, never swallowed
                log.exception("background commit failed; rows stay in the spool for replay")
                self._error = exc
                return

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._stop.set()
        self._ager.join()
        try:
            self.flush()
        finally:
            self._closed = True
            for pending in self._take(None).values():
                pending.segment.close()  # uncommitted: left for replay
            self._spool.close()

    def __enter__(self) -> LakeWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
