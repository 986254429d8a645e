"""LakeWriter: crash-safe, batched writes into the lake from any number of processes.

`append(table, row)` returns only once the row is in this writer's spool (so a crash after
it returns loses nothing) and in an in-memory batch. Batches go to Lance as one commit per
many rows, when they reach `batch_rows` rows or `batch_bytes` bytes, or are `max_age_s` old.
Every commit runs on the writer's background thread, never the caller's: an append costs a
local append however slow or far away the store is, or however long it is down. The one
limit on the caller is `max_backlog_bytes`, the acknowledged rows that may wait for the
store; past it an append is refused (`Backpressure`, naming the bound) and not recorded.
Opening a writer first replays spools left by writers that died; the table keys make
replays idempotent.

A row that cannot reach the spool (a full disk) raises and is not recorded. A commit that
fails (a full disk again, or the lake's disk briefly unwritable) loses nothing: its rows go
back to pending, stay in the spool, and are retried in the background until the lake takes
them, so a writer carries on by itself once space returns.

The lake may be a folder or an object store; the spool is always on local disk
(`layout.spool_root`), so a writer on an object store acknowledges at local-disk speed and
a store that goes away (a network outage) costs only commit retries, never a row. Replay
never depends on anything local to be exactly-once: a replayed row is inserted only if its
key is not in the lake, which Lance answers wherever the lake is.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from episodelake.lake.core import claims, layout, schema, spool, tables
from episodelake.lake.core.errors import LakeError
from episodelake.lake.core.store import Location, location

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
    #: Bytes of acknowledged rows (Arrow size, in memory and in the local spool) that may wait
    #: for the store, over all tables; past it `append` refuses new rows with `Backpressure`
    #: until commits catch up. At 100 KB a step, the default carries a 30 s outage of about
    #: 170 steps/s.
    max_backlog_bytes: int = 512 * 1024 * 1024

    def __post_init__(self):
        if self.durability not in ("process", "machine"):
            raise ValueError(f"durability must be 'process' or 'machine', not {self.durability!r}")
        if self.batch_rows < 1 or self.max_age_s <= 0:
            raise ValueError("batch_rows must be >= 1 and max_age_s > 0")
        if self.max_backlog_bytes < 1:
            raise ValueError("max_backlog_bytes must be >= 1")


class CommitFailed(LakeError):
    """Rows are safe in the spool but the lake did not take them (yet); they are retried."""


class Backpressure(CommitFailed):
    """More acknowledged rows wait for the store than `max_backlog_bytes` allows: this row was
    refused (not recorded); the waiting ones stay in the spool and are retried."""

#: Longest wait between two tries of a failing background commit.
MAX_RETRY_WAIT_S = 30.0


class _Pending:
    """Rows of one table waiting for a commit, and the spool segments that hold them."""

    def __init__(self, segment: spool.Segment):
        self.segments = [segment]
        self.batches: list[pa.RecordBatch] = []
        self.rows = 0
        self.bytes = 0
        self.since = time.monotonic()
        #: a commit of these rows failed once: it may have landed after all, so the next
        #: try of an append-only table deduplicates instead of appending blindly
        self.failed = False

    def add(self, batch: pa.RecordBatch) -> None:
        self.batches.append(batch)
        self.rows += batch.num_rows
        self.bytes += batch.nbytes

    def absorb(self, later: _Pending) -> None:
        """Put rows appended while these were being committed after them, in order."""
        self.segments += later.segments
        self.batches += later.batches
        self.rows += later.rows
        self.bytes += later.bytes


@dataclass
class ReplayReport:
    rows: int = 0
    segments: int = 0
    #: segments that ended in a torn record (a write that never returned: not acknowledged)
    torn_tails: int = 0
    #: one line per segment with unreadable bytes in its middle, naming where a copy is kept
    damaged: list[str] = field(default_factory=list)
    #: dead writers' folders left for a later replay, with the reason
    deferred: list[str] = field(default_factory=list)


def replay_orphans(lake: Location | Path | str, spool_dir: Path | None = None) -> ReplayReport:
    """Commit the rows of every dead writer's spool, one segment at a time, then let go of
    the episodes those writers held (`claims`).

    The spools are this machine's for the lake (`layout.spool_root`), or those under
    `spool_dir` (a spool folder copied from another machine; see `layout.spool_root_in`).
    Each segment is committed and then deleted before the next is read, so a replay needs
    free space for one segment's rows at a time; it checks for that room first and says how
    much it needs when there is not enough (the spool is left as it was).
    """
    loc = location(lake)
    root = layout.spool_root(loc) if spool_dir is None else layout.spool_root_in(Path(spool_dir), loc)
    report = ReplayReport()
    for folder, lock in spool.orphaned(root):
        done = False
        try:
            for path in spool.segments(folder):
                _replay_segment(loc, path, report)
            claims.release_holder(loc, folder.name)
            done = True
            log.info("replayed spool %s", folder.name)
        finally:
            spool.release(folder, lock, remove=done)
    return report


def _replay_segment(lake: Location, path: Path, report: ReplayReport) -> None:
    found = spool.read_segment(path)
    table = path.name.rsplit("-", 1)[0]
    if found.rows.num_rows:
        tables.require_space(lake, path.stat().st_size, f"replaying spool segment {path}")
        kind = "insert_missing" if table in schema.APPEND_ONLY else "upsert"
        try:
            tables.commit(lake, table, found.rows, kind)
        except OSError as exc:
            tables.raise_if_full(lake, exc, path.stat().st_size, f"replaying spool segment {path}")
            raise
    report.rows += found.rows.num_rows
    report.segments += 1
    if found.torn_tail:
        report.torn_tails += 1
        log.warning("spool segment %s ends in %d bytes of a torn write (never acknowledged); dropped",
                    path, found.torn_tail)
    if found.skipped:
        kept = spool.keep_damaged(path)
        where = ", ".join(f"{length} bytes at offset {offset}" for offset, length in found.skipped)
        line = (f"spool segment {path} had unreadable bytes ({where}); its {found.rows.num_rows} "
                f"valid row(s) were replayed and the file is kept at {kept}")
        log.error(line)
        report.damaged.append(line)
    else:
        path.unlink()


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


class LakeWriter:
    def __init__(self, lake: Location | Path | str, options: WriterOptions | None = None):
        self.lake = location(lake)
        self.options = options or WriterOptions()
        tables.ensure_tables(self.lake)
        try:
            self.replay = replay_orphans(self.lake)
        except tables.StorageFull as exc:
            # another writer's leftovers must not stop this one: they stay for the next
            # writer or `elake recover`
            log.warning("left dead writers' spools for later: %s", exc)
            self.replay = ReplayReport(deferred=[str(exc)])
        self.replayed = self.replay.rows
        self._spool = spool.Spool(layout.spool_root(self.lake), fsync=self.options.durability == "machine")
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()  # guards _pending
        self._commit_lock = threading.Lock()  # one commit at a time, in order
        self._closed = False
        #: the last commit failure, until a commit succeeds again
        self.last_error: BaseException | None = None
        self.commits = 0
        self._stop = threading.Event()
        #: set by an append that fills a batch (and by close): commit now, not at the next tick
        self._due = threading.Event()
        self._ager = threading.Thread(target=self._age_loop, name="lake-writer-commit", daemon=True)
        self._ager.start()

    # -- appending ---------------------------------------------------------------------
    def append(self, table: str, row: dict) -> None:
        self.append_rows(table, [row])

    def append_rows(self, table: str, rows: list[dict]) -> None:
        """Returns once every row is in the spool; raises (with none of them recorded) if
        they cannot be: a full disk is `spool.SpoolWriteError`, a lake that keeps refusing
        commits while rows pile up is `CommitFailed`."""
        if self._closed:
            raise RuntimeError("this LakeWriter is closed")
        batches = schema.conform(table, rows).combine_chunks().to_batches()
        if not batches or batches[0].num_rows == 0:
            return
        batch = batches[0]  # one record per call: it is in the spool whole, or not at all
        self._check_backlog(table)
        with self._lock:
            pending = self._pending.get(table)
            if pending is None or pending.segments[-1].broken:
                segment = self._spool.new_segment(table)
                if pending is None:
                    pending = self._pending[table] = _Pending(segment)
                else:
                    pending.segments.append(segment)
            pending.segments[-1].append(batch)
            pending.add(batch)
            due = pending.rows >= self.options.batch_rows or pending.bytes >= self.options.batch_bytes
        if due and self.last_error is None:
            # the background thread commits now; after a failure it retries on its own
            # schedule (growing waits), not at every append
            self._due.set()

    def _check_backlog(self, table: str) -> None:
        """Refuse a row while more acknowledged rows than `max_backlog_bytes` wait for the store."""
        with self._lock:
            waiting = sum(p.bytes for p in self._pending.values())
            rows = sum(p.rows for p in self._pending.values())
        if waiting < self.options.max_backlog_bytes:
            return
        self._due.set()
        why = f"the store is not taking commits ({self.last_error})" if self.last_error is not None \
            else "commits are slower than appends"
        raise Backpressure(
            f"{rows} row(s), {_size(waiting)}, wait for the lake at {self.lake}: {why}. They stay in "
            f"this writer's spool and are retried; this {table} row was not recorded (the bound is "
            f"WriterOptions.max_backlog_bytes = {_size(self.options.max_backlog_bytes)})")

    # -- committing --------------------------------------------------------------------
    def flush(self) -> None:
        """Commit everything appended so far; raises `CommitFailed` if the lake does not
        take it (the rows stay in the spool, retried in the background and by later flushes)."""
        try:
            self._commit(only=None)
        except Exception as exc:
            raise CommitFailed(f"commit to the lake at {self.lake} failed ({exc}); the rows stay in "
                               "this writer's spool and are retried") from exc

    def _take(self, only: str | None, older_than: float | None = None) -> dict[str, _Pending]:
        """Pending rows due for a commit, with the pending rows of every table they refer to
        (an episode row goes with its steps), whatever their age."""
        with self._lock:
            now = time.monotonic()
            chosen = {
                t
                for t, p in self._pending.items()
                if (only is None or t == only) and (older_than is None or now - p.since >= older_than)
            }
            for t in list(chosen):
                chosen.update(p for p in tables.REFERENCES.get(t, ()) if p in self._pending)
            return {t: self._pending.pop(t) for t in chosen}

    def _restore(self, taken: dict[str, _Pending]) -> None:
        with self._lock:
            for table, pending in taken.items():
                pending.failed = True
                later = self._pending.get(table)
                if later is not None:
                    pending.absorb(later)
                self._pending[table] = pending

    def _commit(self, only: str | None, older_than: float | None = None) -> None:
        """Commit due rows, referenced tables first (episodes before steps), so a reader that
        sees a step always finds its episode. On a failure the failed table's rows, and
        those of every table after it, go back to pending, in order; nothing is lost."""
        with self._commit_lock:
            taken = self._take(only, older_than)
            order = [t for t in tables.COMMIT_ORDER if t in taken]
            for i, table in enumerate(order):
                pending = taken[table]
                rows = pa.Table.from_batches(pending.batches, schema=schema.TABLES[table])
                if table in schema.APPEND_ONLY:
                    dedupe = self.options.dedupe_steps or pending.failed
                    kind = "insert_missing" if dedupe else "append"
                else:
                    kind = "upsert"
                try:
                    tables.commit(self.lake, table, rows, kind)
                except BaseException as exc:
                    self._restore({t: taken[t] for t in order[i:]})
                    self.last_error = exc
                    raise
                self.commits += 1
                for segment in pending.segments:
                    segment.discard()
            if taken:
                self.last_error = None

    def _age_loop(self) -> None:
        """The writer's committer: commit full batches as soon as an append says so, and rows
        that waited `max_age_s`; after a failure, retry with growing waits (a full disk, a
        store that is down) until it works again, however often appends knock meanwhile."""
        interval = min(self.options.max_age_s / 2, 0.5)
        backoff = 0.0  # seconds between tries while commits fail; 0 while they work
        retry_at = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            woken = self._due.wait(max(interval, retry_at - now) if backoff else interval)
            if self._stop.is_set():
                return
            self._due.clear()
            if backoff and time.monotonic() < retry_at:
                continue  # failing: the next try waits its turn
            try:
                self._commit(only=None, older_than=None if woken or backoff else self.options.max_age_s)
                backoff = 0.0
            except Exception as exc:
                first = backoff == 0.0  # the whole traceback once per run of failures
                backoff = min(max(backoff, interval) * 2, MAX_RETRY_WAIT_S)
                retry_at = time.monotonic() + backoff
                log.warning("background commit failed; rows stay in the spool, retrying in %.1f s: %s",
                            backoff, exc, exc_info=first)

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        """Commit what is left and let go of the spool; if the lake does not take the last
        rows, they stay in the spool for the next writer (or `elake recover`) to replay."""
        if self._closed:
            return
        self._stop.set()
        self._due.set()
        self._ager.join()
        try:
            self.flush()
        finally:
            self._closed = True
            for pending in self._take(None).values():
                for segment in pending.segments:
                    segment.close()  # uncommitted: left for replay
            self._spool.close()

    def __enter__(self) -> LakeWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
