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

Append-only rows (steps) are not committed by each writer: the writer's thread uploads them
as Lance fragments and hands the fragments to the machine's committer, which appends every
writer's fragments in one commit (`episodelake.lake.storage.committer`: the stages, who the
committer is, and why nothing is lost or stored twice when any of them dies). Rows of the
other tables (episodes: upserts) and the claims of new episodes go in the same offer, and the
committer commits them in its round, those the steps need before them (`_offer_all`,
`_row_kinds`), so the writer's thread waits on no lock and no commit. Rows that come back from a failed round are merged by the
writer itself, claims placed first (`_commit_each`). `WriterOptions(handoff=False)` commits
every table directly (the path before the committer existed).

The spool keeps a table's rows in segments of at most one batch (`batch_rows` /
`batch_bytes`), and a backlog is committed one batch at a time, each batch's segments
deleted as soon as it is in the lake: after a full disk the writer gets going with as little
as one batch of free space, and frees spool space as it commits.

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
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from episodelake.lake.storage import claims, committer, group_commit, layout, schema, spool, tables
from episodelake.lake.storage.errors import EpisodeLakeError, InvalidInput, LakeError
from episodelake.lake.storage.store import Location, StoreUnavailable, location, store_errors

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriterOptions:
    batch_rows: int = 512
    batch_bytes: int = 128 * 1024 * 1024
    #: The oldest row waits at most this long for its commit: with 1.0 a reader (a trainer
    #: reading what collectors just wrote) sees a step about 1-2 s after `log_step` returned.
    max_age_s: float = 1.0
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
    #: Append-only rows (steps) go to the store as uploaded fragments that the machine's
    #: committer appends many at a time (one commit for many writers' batches); False: this
    #: writer commits them itself, one commit per batch.
    handoff: bool = True
    #: How long `flush` waits for the committer to commit this writer's fragments.
    flush_timeout_s: float = 120.0

    def __post_init__(self):
        if self.durability not in ("process", "machine"):
            raise InvalidInput(f"durability must be 'process' or 'machine', not {self.durability!r}")
        if self.batch_rows < 1 or self.max_age_s <= 0:
            raise InvalidInput("batch_rows must be >= 1 and max_age_s > 0")
        if self.max_backlog_bytes < 1:
            raise InvalidInput("max_backlog_bytes must be >= 1")


class CommitFailed(LakeError):
    """Rows are safe in the spool but the lake did not take them (yet); they are retried."""


class Backpressure(CommitFailed):
    """More acknowledged rows wait for the store than `max_backlog_bytes` allows: this row was
    refused (not recorded); the waiting ones stay in the spool and are retried."""

#: Longest wait between two tries of a failing background commit.
MAX_RETRY_WAIT_S = 30.0


class _Part:
    """One spool segment and the rows written to it (at most about one batch)."""

    __slots__ = ("segment", "batches", "rows", "bytes", "sealed")

    def __init__(self, segment: spool.Segment):
        self.segment = segment
        self.batches: list[pa.RecordBatch] = []
        self.rows = 0
        self.bytes = 0
        #: the last part before an episode boundary: later rows go to a new part (`episode_boundary`)
        self.sealed = False


class _Pending:
    """Rows of one table waiting for a commit, by the spool segments that hold them."""

    def __init__(self, parts: list[_Part], failed: bool = False):
        self.parts = parts
        self.since = time.monotonic()
        #: a commit of these rows failed once: it may have landed after all, so the next
        #: try of an append-only table deduplicates instead of appending blindly
        self.failed = failed

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.parts)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.parts)

    def add(self, batch: pa.RecordBatch) -> None:
        part = self.parts[-1]
        part.segment.append(batch)
        part.batches.append(batch)
        part.rows += batch.num_rows
        part.bytes += batch.nbytes

    def absorb(self, later: _Pending) -> None:
        """Put rows appended while these were being committed after them, in order."""
        self.parts += later.parts


def _slices(parts: list[_Part], rows: int, nbytes: int) -> list[list[_Part]]:
    """Whole parts grouped into commits of at most two batches (`rows` rows, `nbytes` bytes)
    each: a part holds about one batch, so a backlog goes a batch or two at a time while a
    batch and the few rows appended since it filled go together."""
    out: list[list[_Part]] = []
    n = b = 0
    for part in parts:
        if out and n + part.rows <= 2 * rows and b + part.bytes <= 2 * nbytes:
            out[-1].append(part)
            n += part.rows
            b += part.bytes
        else:
            out.append([part])
            n, b = part.rows, part.bytes
    return out


@dataclass
class _Flight:
    """Rows handed to the machine's committer as one offer, until it is committed."""

    #: the table of its fragments (None: it has none) and the rows they hold
    table: str | None
    parts: list[_Part]
    offer: Path
    #: rows of upsert tables it carries inline, by table, and the claims (tokens) it places
    upserts: dict[str, list[_Part]] = field(default_factory=dict)
    claims: list[str] = field(default_factory=list)

    @property
    def every_part(self) -> list[_Part]:
        return self.parts + [p for parts in self.upserts.values() for p in parts]

    @property
    def carries(self) -> bool:
        """Whether it carries episode rows or claims, which its committer commits before any fragment."""
        return bool(self.upserts or self.claims)


@dataclass
class _Ahead:
    """Data files of a hand-off slice being written while the commits before its offer run."""

    parts: list[_Part]
    future: Future


def _abandon(ahead: _Ahead | None) -> None:
    """Wait for a write ahead whose rows were not offered (a commit before it failed, or the
    committer has enough): its files are in no version, like those of a writer killed after
    uploading, and the rows stay pending."""
    if ahead is not None:
        ahead.future.exception()


def _ahead(rows: pa.Table | None, kinds: dict[str, dict[str, pa.Table]]) -> bool:
    """Whether an offer's fragments (`rows`) hold no row of an episode whose first row it
    carries (`committer.offer`'s `ahead`)."""
    if rows is None or "episode_id" not in rows.column_names:
        return False
    first = [r.column("episode_id") for kind in committer.FIRST_ROWS for t, r in kinds.get(kind, {}).items()
             if t == "episodes"]
    if not first:
        return True
    return not pc.any(pc.is_in(rows.column("episode_id"), value_set=pa.concat_arrays(
        [c.combine_chunks() for c in first]))).as_py()


def _rows(table: str, parts: list[_Part]) -> pa.Table:
    return pa.Table.from_batches([b for p in parts for b in p.batches], schema=schema.TABLES[table])


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


#: Batches that may be handed to the committer and not yet committed, per writer: each
#: offer's data files and its spool segments both take disk until the commit, so offering a
#: backlog a few batches at a time lets a nearly full disk drain it (`LakeWriter._commit`).
MAX_IN_FLIGHT_BATCHES = 2
#: Keys of an upsert table a writer remembers having offered (`LakeWriter._note_offered`):
#: about one per episode, so a collector forgets nothing in a realistic run.
OFFERED_KEYS_KEPT = 100_000
#: Rows a replay commits at a time: a segment is replayed in slices of this many rows, each
#: needing free space for itself only (the writers of this release keep a segment to about
#: one batch, so a replay needs about one batch of free space).
REPLAY_SLICE_ROWS = 512
#: How long opening a writer waits for the machine's committer to finish a round before it
#: settles a dead writer's hand-offs (past it, that spool is left for later).
SETTLE_WAIT_S = 5.0


def replay_orphans(lake: Location | Path | str, spool_dir: Path | None = None, *,
                   settle_wait_s: float | None = SETTLE_WAIT_S) -> ReplayReport:
    """Commit the rows of every dead writer's spool, one segment at a time, then let go of
    the episodes those writers held (`claims`).

    The spools are this machine's for the lake (`layout.spool_root`), or those under
    `spool_dir` (a spool folder copied from another machine; see `layout.spool_root_in`).
    A dead writer's hand-offs to the committer are settled first, under the commit and update
    locks (`committer.quiet`, `committer.settle_dead`): after that no committer commits
    anything of that writer, and what it did commit is found by the keys. Each segment is committed in slices of
    `REPLAY_SLICE_ROWS` rows and then deleted before the next is read, so a replay needs free
    space for one slice at a time; it checks for that room first and says how much it needs
    when there is not enough (the spool is left as it was). `settle_wait_s`: how long to wait
    for a committer mid-round (None: as long as it takes).
    """
    loc = location(lake)
    root = layout.spool_root(loc) if spool_dir is None else layout.spool_root_in(Path(spool_dir), loc)
    report = ReplayReport()
    for folder, lock in spool.orphaned(root):
        done = False
        try:
            with committer.quiet(loc, settle_wait_s) as held:
                if not held:
                    report.deferred.append(f"{folder}: the committer on this machine is mid-commit (a round, or a "
                                           "merge of episode updates); replayed by the next writer or `elake recover`")
                    continue
                settled = committer.settle_dead(folder)
            settled += group_commit.withdraw(folder, lambda table, kind: claims.shared_lock(loc, table, kind))
            if settled:
                log.info("spool %s: %d hand-off(s) and shared-commit request(s) withdrawn; its rows are "
                         "merged by key", folder.name, settled)
            lost = claims.settle_noted(loc, folder)  # before any row: see `claims`
            for path in spool.segments(folder):
                _replay_segment(loc, path, report, lost)
            claims.release_holder(loc, folder.name)
            done = True
            log.info("replayed spool %s", folder.name)
        finally:
            spool.release(folder, lock, remove=done)
    return report


def _replay_segment(lake: Location, path: Path, report: ReplayReport, lost: set[str]) -> None:
    """`lost`: episodes whose claim was lost (`claims.settle_noted`): their rows are set aside."""
    found = spool.read_segment(path)
    table = path.name.rsplit("-", 1)[0]
    rows = _set_aside(path.parent.parent, table, found.rows, lost, fsync=True)
    if rows.num_rows:
        kind = "insert_missing" if table in schema.APPEND_ONLY else "upsert"
        if kind == "upsert":  # the last value of each key, so the slices' order does not matter
            rows = tables.dedupe_last(rows, schema.KEYS[table])
        for start in range(0, rows.num_rows, REPLAY_SLICE_ROWS):
            part = rows.slice(start, REPLAY_SLICE_ROWS)
            needed = part.nbytes
            what = f"replaying rows {start}-{start + part.num_rows - 1} of spool segment {path}"
            tables.require_space(lake, needed, what)
            try:
                tables.commit(lake, table, part, kind)
            except OSError as exc:
                tables.raise_if_full(lake, exc, needed, what)
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


def _set_aside(root: Path, table: str, rows: pa.Table, lost: set[str], *, fsync: bool) -> pa.Table:
    """`rows` without those of the `lost` episodes, which are kept under spool root `root`
    (`spool.set_aside`) first: they are never committed under that id (see `claims`)."""
    if not lost or "episode_id" not in rows.column_names or rows.num_rows == 0:
        return rows
    theirs = pc.is_in(rows.column("episode_id"), value_set=pa.array(sorted(lost), pa.string()))
    if not pc.any(theirs).as_py():
        return rows
    aside = rows.filter(theirs)
    for episode_id in sorted(set(aside.column("episode_id").to_pylist())):
        one = aside.filter(pc.equal(aside.column("episode_id"), episode_id))
        folder = spool.set_aside(root, episode_id, table, one, fsync)
        log.error("episode %s: its claim, taken while the store was down, was lost; %d %s row(s) set "
                  "aside in %s, not stored (`elake recover` lists them; `--restore-conflicts` stores them under a new id)",
                  episode_id, one.num_rows, table, folder)
    return rows.filter(pc.invert(theirs))


def check_spool(lake: Location | Path | str) -> Path:
    """This machine's spool root for the lake, made if missing; `spool.SpoolWriteError`
    (naming `ELAKE_SPOOL`) when it cannot be."""
    loc = location(lake)
    try:
        root = layout.spool_root(loc)
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = layout.local_spool_base() / loc.key() if not loc.is_local else loc.local / layout.SPOOL_DIR
        raise spool.SpoolWriteError(where, 4096, exc) from None
    return root


def _size(n: int) -> str:
    if n < 2**10:
        return f"{n} bytes"
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


class LakeWriter:
    def __init__(self, lake: Location | Path | str, options: WriterOptions | None = None):
        self.lake = location(lake)
        self.options = options or WriterOptions()
        if self.lake.is_local:
            tables.ensure_tables(self.lake)
        else:  # opening asks the store nothing: the writer's thread sees to the tables (`_register`)
            tables.recall_tables(self.lake)
        #: dead writers' spools replayed at the open (a lake on an object store: by the
        #: writer's thread, once the store answers; `replay_done` is set then)
        self.replay = ReplayReport()
        self.replay_done = threading.Event()
        if self.lake.is_local:
            self._replay_orphans()
        self._root = check_spool(self.lake)
        self._spool = spool.Spool(self._root, fsync=self.options.durability == "machine")
        self._pending: dict[str, _Pending] = {}
        #: rows handed to the machine's committer, until it has committed them
        self._flights: list[_Flight] = []
        #: rows `_commit` has taken from pending and not yet committed, offered or put back
        self._in_hand: dict[str, _Pending] = {}
        self._offers = 0
        #: hand-offs the committer sent back, until none is out any more: their `.retry` files
        #: stay (so the committer sends the later ones back too, `committer._scan`), and
        #: their rows go back to pending together, in the order they were offered
        self._returned: list[_Flight] = []
        self._versions: set[tuple[str, int | str | None]] = set()  # (table, version) that took offers
        #: keys of upsert tables this writer's offers carried, by table (`_row_kinds`)
        self._offered: dict[str, set[tuple]] = {}
        self._lock = threading.Lock()  # guards _pending and _flights
        self._commit_lock = threading.Lock()  # one commit at a time, in order
        self._elect_lock = threading.Lock()
        #: writes hand-off data files ahead of the commits that go before them (`_write_ahead`)
        self._uploader: ThreadPoolExecutor | None = None
        #: places and deletes claims beside the commits of rows (`_claims_aside`)
        self._claimer: ThreadPoolExecutor | None = None
        self._claiming: Future | None = None
        self._claimed_at = -float("inf")
        self._closed = False
        #: deferred claims of the episodes this writer's recorder minted (`claims.ClaimBook`)
        self.claims = claims.ClaimBook(self.lake, self._spool.dir if self.options.handoff else None)
        #: the machine's committer, when this process is it (`committer.NodeCommitter`)
        self.node_committer: committer.NodeCommitter | None = None
        #: the last commit failure, until a commit succeeds again
        self.last_error: BaseException | None = None
        #: a failure no retry mends (this machine's id taken by another machine): nothing is
        #: committed, and appends and flushes raise it; what was acknowledged stays in the spool
        self.fatal: EpisodeLakeError | None = None
        #: whether the lake's tables are checked and this machine's id is taken in the lake
        #: (`_register`; a lake on an object store: by the writer's thread, before its first commit)
        self._registered = self.lake.is_local
        #: commits of this writer's rows: its own, and the committer's that carried its offers
        self.commits = 0
        self._stop = threading.Event()
        #: set by an append that fills a batch (and by close): commit now, not at the next tick
        self._due = threading.Event()
        #: flushes waiting (the thread commits everything at each tick meanwhile), failed
        #: commit attempts so far, and a condition notified after each attempt
        self._flushing = 0
        self._failures = 0
        self._progress = threading.Condition()
        #: a flush asked for a try now, even during a failure's backoff
        self._retry_now = False
        #: the last part of each table at an episode boundary, until the next commit takes
        #: the rows up to it (`episode_boundary`, `_take_cut`)
        self._cut: dict[str, _Part] | None = None
        #: commit what is pending at the next tick, however young (`commit_soon`)
        self._eager = False
        #: `when_committed` callbacks: (the parts they wait for, the callback)
        self._waiters: list[tuple[set[int], Callable[[], None]]] = []
        #: callbacks taken from `_waiters` and not yet returned (another thread may be calling
        #: them): `flush` returns only once they have, so what they do has happened
        self._calling = 0
        self._ager = threading.Thread(target=self._age_loop, name="lake-writer-commit", daemon=True)
        self._ager.start()

    def _register(self) -> None:
        """Before this writer's first commit to a lake on an object store: its tables are
        there with this release's columns (made now if missing; nothing to ask where this
        machine noted them before) and this machine's id is its own."""
        with store_errors(self.lake):  # a wrong bucket: one line naming the lake, logged and retried
            tables.ensure_tables(self.lake)
        try:
            claims.register_machine(self.lake)
        except claims.MachineIdTaken as exc:
            self.fatal = exc
            log.error("%s", exc)
            raise
        self._registered = True

    @property
    def replayed(self) -> int:
        return self.replay.rows

    def _replay_orphans(self) -> None:
        """Replay dead writers' spools (see `replay_orphans`); raises (to be tried again) when
        the store does not take them."""
        try:
            self.replay = replay_orphans(self.lake)
        except tables.StorageFull as exc:
            # another writer's leftovers must not stop this one: they stay for the next
            # writer or `elake recover`
            log.warning("left dead writers' spools for later: %s", exc)
            self.replay = ReplayReport(deferred=[str(exc)])
        self.replay_done.set()

    # -- appending ---------------------------------------------------------------------
    def append(self, table: str, row: dict) -> None:
        self.append_rows(table, [row])

    def append_rows(self, table: str, rows: list[dict]) -> None:
        """Returns once every row is in the spool; raises (with none of them recorded) if
        they cannot be: a full disk is `spool.SpoolWriteError`, more rows waiting for the
        store than `WriterOptions.max_backlog_bytes` is `Backpressure`."""
        if self._closed:
            raise RuntimeError("this LakeWriter is closed")
        if self.fatal is not None:
            raise self.fatal
        batches = schema.conform(table, rows).combine_chunks().to_batches()
        if not batches or batches[0].num_rows == 0:
            return
        batch = batches[0]  # one record per call: it is in the spool whole, or not at all
        if batch.nbytes > self.options.max_backlog_bytes:
            raise InvalidInput(
                f"this {table} row ({_size(batch.nbytes)}) is larger than WriterOptions.max_backlog_bytes "
                f"= {_size(self.options.max_backlog_bytes)}, the most that may wait for the store: no row "
                "this size could ever be recorded; raise the bound (the default is 512 MiB). The row was "
                "not recorded, and nothing recorded before is touched")
        self._check_backlog(table)
        opts = self.options
        with self._lock:
            pending = self._pending.get(table)
            last = None if pending is None else pending.parts[-1]
            if (last is None or last.sealed or last.segment.broken or last.rows >= opts.batch_rows
                    or last.bytes >= opts.batch_bytes):
                part = _Part(self._spool.new_segment(table))  # a segment holds about one batch
                if pending is None:
                    pending = self._pending[table] = _Pending([part])
                else:
                    pending.parts.append(part)
            assert pending is not None  # made above when the table had none
            pending.add(batch)
            due = pending.rows >= opts.batch_rows or pending.bytes >= opts.batch_bytes
        if due and self.last_error is None:
            # the background thread commits now; after a failure it retries on its own
            # schedule (growing waits), not at every append
            self._due.set()

    def _check_backlog(self, table: str) -> None:
        """Refuse a row while more acknowledged rows than `max_backlog_bytes` wait for the store."""
        with self._lock:
            waiting = sum(p.bytes for p in self._pending.values())
            offered = self._offered_parts()
            waiting += sum(part.bytes for part in offered)
            rows = sum(p.rows for p in self._pending.values()) + sum(part.rows for part in offered)
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
    def flush(self, timeout: float | None = None) -> None:
        """Wait until every row appended so far is committed (and let go of its spool
        segments). The commits run on the writer's thread, never this one: a flush asks it to
        commit now and waits, so a store that hangs holds the caller no longer than it chose.

        Without `timeout`, raises `CommitFailed` when commits fail twice in a row after the
        flush began (the first failure is retried at once; the rows stay in the spool, retried
        in the background and by later flushes), or when the machine's committer makes no
        progress for
        `WriterOptions.flush_timeout_s`. With `timeout` (seconds), it waits through failures
        (an outage) for up to that long, then raises `CommitFailed` saying how much is left.
        Either way the message says how many rows and bytes still wait, and where."""
        if self._closed:
            raise RuntimeError("this LakeWriter is closed")
        wanted = self._parts_now()
        if not wanted:
            self._waiters_done(timeout)
            return
        started = time.monotonic()
        failures, retried = self._failures, False
        with self._lock:
            self._flushing += 1
        try:
            self._kick()
            progress_at, left = started, self._left(wanted)
            while left[0]:
                if self.fatal is not None:
                    raise self.fatal
                now = time.monotonic()
                failed = self._failures - failures
                if timeout is None and failed >= 2 and self.last_error is not None:
                    # twice in a row (the first failure was retried at once: a lost race, a
                    # blip): the store is not taking commits now
                    raise CommitFailed(f"commit to the lake at {self.lake} failed ({self.last_error}); "
                                       f"{self._left_text(left)}")
                if failed == 1 and not retried:
                    retried = True
                    self._kick()
                if timeout is not None and now - started > timeout:
                    why = f"; last error: {self.last_error}" if self.last_error is not None else ""
                    raise CommitFailed(f"not committed within {timeout:g} s{why}; {self._left_text(left)}")
                if timeout is None and now - progress_at > self.options.flush_timeout_s:
                    raise CommitFailed(
                        f"the committer of this machine did not commit in {self.options.flush_timeout_s:.0f} s "
                        f"({self._committer_state()}); {self._left_text(left)}")
                with self._progress:
                    self._progress.wait(0.05)
                now_left = self._left(wanted)
                if now_left != left:
                    progress_at, left = time.monotonic(), now_left
        finally:
            with self._lock:
                self._flushing -= 1
        self._waiters_done(timeout)

    def _uncommitted(self) -> list[_Part]:
        """Every spool part whose rows are not known committed: pending, being committed now,
        or handed off. Call with `_lock` held."""
        parts = [p for pending in self._pending.values() for p in pending.parts]
        parts += [p for pending in self._in_hand.values() for p in pending.parts]
        parts += self._offered_parts()
        return parts

    def _offered_parts(self) -> list[_Part]:
        """The spool parts of every hand-off not yet settled: in flight, or come back and not
        yet put back to pending. Call with `_lock` held (or once the thread is stopped)."""
        return [p for f in self._flights + self._returned for p in f.every_part]

    def _parts_now(self) -> set[int]:
        """The spool parts holding every row appended so far and not yet committed."""
        with self._lock:
            return {id(p) for p in self._uncommitted()}

    def _left(self, wanted: set[int]) -> tuple[int, int, int]:
        """(parts, rows, bytes) of `wanted` not yet committed."""
        parts = rows = nbytes = 0
        with self._lock:
            every = self._uncommitted()
        for part in every:
            if id(part) in wanted:
                parts += 1
                rows += part.rows
                nbytes += part.bytes
        return parts, rows, nbytes

    def _left_text(self, left: tuple[int, int, int]) -> str:
        return (f"{left[1]} row(s) ({_size(left[2])}) stay in this writer's spool ({self._spool.dir}) and "
                "are retried in the background; a writer that closes with them leaves them for the next "
                "writer of this lake on this machine, or `elake recover`")

    def _kick(self) -> None:
        """Have the writer's thread commit now, even while it waits out a failure's backoff."""
        self._retry_now = True
        self._due.set()

    def when_committed(self, callback: Callable[[], None]) -> None:
        """Call `callback` (on the writer's thread, or a flushing caller's) once every row
        appended so far is committed. Never called if the writer closes first."""
        wanted = self._parts_now()
        with self._lock:
            self._waiters.append((wanted, callback))

    def episode_boundary(self) -> None:
        """An episode of a collector at its own pace began (`Recorder`): commit what is
        pending now at the next tick, however young, and nothing appended after this call.
        The last steps and row of the episode before and this one's claim and row go in one
        offer now, instead of each episode's first and last batches carrying rows and waiting
        for their age; the new episode's steps (logged right after, maybe before the thread's
        tick) wait for the next offer, so the committer appends this one's steps beside the
        new row rather than after it (`committer._split_round`). `max_age_s` stays the longest
        a row waits. Only with hand-offs to a lake on an object store, where it was measured:
        elsewhere an early commit is one more commit of this writer's own."""
        if self.lake.is_local or not self.options.handoff:
            return
        with self._lock:
            if not self._pending:
                return
            self._cut = {t: p.parts[-1] for t, p in self._pending.items()}
            for part in self._cut.values():
                part.sealed = True
            self._eager = True
        self._due.set()

    def commit_soon(self) -> None:
        """Ask the writer's thread to commit what is pending now rather than when it is due."""
        with self._lock:
            self._eager = True
        self._due.set()

    def _run_waiters(self) -> None:
        """Call the `when_committed` callbacks whose rows are all committed."""
        with self._lock:
            if not self._waiters:
                return
            live = {id(p) for p in self._uncommitted()}
            ready = [cb for wanted, cb in self._waiters if not (wanted & live)]
            self._waiters = [(w, cb) for w, cb in self._waiters if w & live]
            self._calling += len(ready)
        for callback in ready:
            try:
                callback()
            except Exception:  # a caller's callback must not stop the writer's thread
                log.exception("a when_committed callback failed")
            finally:
                with self._lock:
                    self._calling -= 1

    def _waiters_done(self, timeout: float | None) -> None:
        """Run the callbacks that are due, and wait for those another thread is running (at
        most `timeout`, else `flush_timeout_s`: a callback stuck on the store finishes on
        its own thread)."""
        self._run_waiters()
        deadline = time.monotonic() + (self.options.flush_timeout_s if timeout is None else timeout)
        while time.monotonic() < deadline:
            with self._lock:
                if not self._calling:
                    return
            time.sleep(0.005)

    def _committer_state(self) -> str:
        node = self.node_committer
        if node is not None:
            return f"this process commits; last error: {node.last_error}" if node.last_error else "this process commits"
        return "another process on this machine commits"

    def _elect(self) -> None:
        """Become the machine's committer if there is none (see `committer`)."""
        if not self.options.handoff or self.node_committer is not None or self._closed:
            return
        with self._elect_lock:  # the writer's thread and a flushing caller may both try
            if self.node_committer is None and not self._closed:
                self.node_committer = committer.NodeCommitter.elect(self.lake, self._root)

    def _take(self, only: str | None, older_than: float | None = None) -> dict[str, _Pending]:
        """Pending rows due for a commit, with the pending rows of every table they refer to
        (an episode row goes with its steps), whatever their age; after an episode boundary,
        the rows pending at it (`_take_cut`)."""
        with self._lock:
            now = time.monotonic()
            cut, self._cut = self._cut, None
            if cut is not None:
                self._in_hand = self._take_cut(cut, now)
                return self._in_hand
            chosen = {
                t
                for t, p in self._pending.items()
                if (only is None or t == only) and (older_than is None or now - p.since >= older_than)
            }
            for t in list(chosen):
                chosen.update(p for p in tables.REFERENCES.get(t, ()) if p in self._pending)
            taken = {t: self._pending.pop(t) for t in chosen}
            self._in_hand = taken  # still uncommitted for a flush, until `_commit` is done with them
            return taken

    def _take_cut(self, cut: dict[str, _Part], now: float) -> dict[str, _Pending]:
        """With `_lock` held: the rows pending at the last episode boundary, each table's up
        to the part sealed there (rows put back in front since stay in front); what came
        after stays pending, due by its own age. The boundary's offer then holds the next
        episode's claim and first row but none of its steps, so the committer appends the
        offer's steps beside that row, not after it (`committer._split_round`)."""
        taken: dict[str, _Pending] = {}
        for table, sealed in cut.items():
            pending = self._pending.get(table)
            if pending is None:
                continue
            at = next((i for i, part in enumerate(pending.parts) if part is sealed), len(pending.parts) - 1)
            if at + 1 < len(pending.parts):
                rest = _Pending(pending.parts[at + 1:], pending.failed)
                rest.since = now
                pending.parts = pending.parts[:at + 1]
                self._pending[table] = rest
            else:
                del self._pending[table]
            taken[table] = pending
        return taken

    def _restore(self, taken: dict[str, _Pending], uncertain: str | None = None) -> None:
        """Put rows back in front of those appended since. `uncertain`: the table whose
        commit failed in a way that may have landed: its rows are merged by key next time."""
        with self._lock:
            for table, pending in taken.items():
                if not pending.parts:
                    continue
                if table == uncertain:
                    pending.failed = True
                later = self._pending.get(table)
                if later is not None:
                    pending.absorb(later)
                    pending.failed = pending.failed or later.failed
                self._pending[table] = pending

    def _settle_flights(self) -> bool:
        """Let go of the spool segments of hand-offs the committer committed; put those it
        could not commit back to pending (merged by key next), in the order they were
        offered, once none is out any more (until then their `.retry` files stay: see
        `_held_back`). True if any came back."""
        with self._lock:
            flights = list(self._flights)
        for flight in flights:
            where = committer.state(flight.offer)
            if where in (committer.OFFER, committer.TAKEN):
                continue
            if where != committer.DONE:  # RETRY, or gone (withdrawn): whether it landed is unknown
                self.claims.offer_settled(flight.claims, placed=False)
                with self._lock:
                    self._flights.remove(flight)
                    self._returned.append(flight)
                continue
            self.claims.offer_settled(flight.claims, placed=True)  # before any waiter runs
            for part in flight.every_part:
                part.segment.discard()
            versions: set[tuple[str, int | str | None]] = set()
            if flight.table is not None:
                versions.add((flight.table, committer.committed_version(flight.offer)))
            if flight.upserts:
                versions.add(("", committer.committed_merge(flight.offer)))
            for version in versions - self._versions:  # one commit may carry several offers
                self._versions.add(version)
                self.commits += 1
            self.last_error = None
            committer.forget(flight.offer)
            with self._lock:  # last: a flush waiting on it finds it all done
                self._flights.remove(flight)
        with self._lock:
            if self._flights or not self._returned:
                return False
            returned, self._returned = self._returned, []
        back: dict[str, _Pending] = {}
        for flight in returned:
            if flight.table is not None:
                back.setdefault(flight.table, _Pending([])).parts.extend(flight.parts)
            for table, parts in flight.upserts.items():
                back.setdefault(table, _Pending([])).parts.extend(parts)
            committer.forget(flight.offer)
        for pending in back.values():
            pending.failed = True  # the committer's append may have landed
        self._restore(back)
        return True

    def _set_aside_lost(self, taken: dict[str, _Pending]) -> None:
        """Take the rows of episodes whose claim was lost out of `taken` (kept under the spool
        root first). A part left empty has its segment deleted: its rows are kept elsewhere."""
        lost = self.claims.lost_ids()
        if not lost:
            return
        fsync = self.options.durability == "machine"
        for table, pending in taken.items():
            kept = []
            for part in pending.parts:
                batches = []
                for batch in part.batches:
                    rows = _set_aside(self._root, table, pa.Table.from_batches([batch]), lost, fsync=fsync)
                    batches += rows.to_batches()
                part.batches = batches
                part.rows = sum(b.num_rows for b in batches)
                part.bytes = sum(b.nbytes for b in batches)
                if part.rows:
                    kept.append(part)
                else:
                    part.segment.discard()
            pending.parts = kept
        for table in [t for t, p in taken.items() if not p.parts]:
            del taken[table]

    @property
    def store_down(self) -> bool:
        """Whether the last commit failed because the store could not be reached."""
        return isinstance(self.last_error, StoreUnavailable)

    def _in_flight_full(self) -> bool:
        """Whether hand-offs not yet committed hold `MAX_IN_FLIGHT_BATCHES` batches or more."""
        with self._lock:
            rows = sum(p.rows for f in self._flights for p in f.parts)
            nbytes = sum(p.bytes for f in self._flights for p in f.parts)
        opts = self.options
        return rows >= MAX_IN_FLIGHT_BATCHES * opts.batch_rows or nbytes >= MAX_IN_FLIGHT_BATCHES * opts.batch_bytes

    def _handoff(self, table: str, pending: _Pending) -> bool:
        return (self.options.handoff and table in schema.APPEND_ONLY
                and not (self.options.dedupe_steps or pending.failed))

    def _commit(self, only: str | None, older_than: float | None = None) -> bool:
        """Commit due rows, referenced tables first (episodes before steps), so a reader that
        sees a step always finds its episode; the claims of the episodes go before any of
        their rows. Each table's rows go in slices of about one batch, each slice's spool
        segments deleted once it is in the lake (or handed to the committer: see
        `committer`). On a failure the rows not yet committed, and those of every table after
        it, go back to pending, in order; nothing is lost."""
        if self.fatal is not None:
            raise self.fatal
        with self._commit_lock:
            self._settle_flights()
            if self._held_back():
                return False  # an offer came back while later ones are out: they settle first
            taken = self._take(only, older_than)
            try:
                order = [t for t in tables.COMMIT_ORDER if t in taken]
                if self._offers_all(taken):
                    self._commit_offered(taken, order)
                elif self._flights:  # rows merged here would race the offers still out
                    self._restore(taken)
                    taken.clear()
                    return False
                else:
                    self._commit_each(taken, order)
            finally:
                with self._lock:
                    self._in_hand = {}
        if self._flights and self.node_committer is not None:
            self.node_committer.wake()
        if self._flushing:  # a flush waits: let go of finished episodes now, not at the next tick
            try:
                self.claims.drop_released()
            except Exception as exc:  # the claims stay held a little longer; tried again next time
                log.warning("releasing finished episodes' claims failed; retried at the next commit: %s", exc)
        return True

    def _commit_offered(self, taken: dict[str, _Pending], order: list[str]) -> None:
        """`_commit` handing everything to the machine's committer (`_offer_all`)."""
        had = bool(taken)
        try:
            if self.claims.unsettled:  # provisional claims are settled before any row
                self.claims.place()
            self._set_aside_lost(taken)
            self._offer_all(taken, [t for t in order if t in taken])
        except BaseException as exc:
            self._restore(taken)
            self.last_error = exc
            raise
        if had:
            self.last_error = None

    def _commit_each(self, taken: dict[str, _Pending], order: list[str]) -> None:
        """`_commit` with this writer committing the rows of upsert tables itself (rows that
        came back from a failed commit, `handoff=False`, steps that may be stored already):
        claims placed first, then each table in order, steps offered last or committed here."""
        ahead = self._write_ahead(taken, order)
        try:
            self.claims.place()
        except BaseException as exc:
            _abandon(ahead)
            self._restore(taken)
            self.last_error = exc
            raise
        self._set_aside_lost(taken)
        order = [t for t in order if t in taken]  # a table left empty by it is done
        opts = self.options
        held_back = False
        for i, table in enumerate(order):
            if held_back:
                break
            pending = taken[table]
            if table in schema.APPEND_ONLY:
                kind = "insert_missing" if opts.dedupe_steps or pending.failed else "append"
            else:
                kind = "upsert"
            handoff = self._handoff(table, pending)
            try:
                for parts in _slices(list(pending.parts), opts.batch_rows, opts.batch_bytes):
                    if handoff and self._in_flight_full():
                        # the rest waits for the committer: each offer holds its data files
                        # and its spool segments until committed, so a backlog offered
                        # whole would need room for all of it twice (a disk with less
                        # free than the backlog would never drain)
                        self._restore({t: taken[t] for t in order[i:]})
                        held_back = True
                        break
                    rows = _rows(table, parts)
                    if handoff:
                        if ahead is not None and ahead.parts == parts:
                            fragments, ahead = ahead.future.result(), None
                        else:
                            fragments = committer.write(self.lake, table, rows, opts.batch_rows)
                        self._offers += 1
                        offer = committer.offer(self._spool.dir, f"{self._offers:08d}-{table}", table,
                                                rows.num_rows, fragments)
                        with self._lock:
                            self._flights.append(_Flight(table, parts, offer))
                    else:
                        if kind == "upsert" and opts.handoff:
                            self._upsert_together(table, rows)
                        else:
                            tables.commit(self.lake, table, rows, kind)
                        self.commits += 1
                        for part in parts:
                            part.segment.discard()
                    del pending.parts[:len(parts)]
            except BaseException as exc:
                _abandon(ahead)
                # an upload that failed left nothing in any version: not uncertain
                self._restore({t: taken[t] for t in order[i:]}, uncertain=None if handoff else table)
                self.last_error = exc
                raise
        _abandon(ahead)  # held back before its turn (the committer has two batches)
        if taken:
            self.last_error = None

    def _held_back(self) -> bool:
        """Whether this writer offers nothing now: an offer of it came back (`_returned`) and
        later ones are still out. Otherwise offers follow each other while earlier ones are in
        flight: the committer commits a writer's offers in the order they were made (one
        round takes them all, sorted; claims, then episode rows, then fragments) and sends
        back every later one once one has come back, so a step never lands before its episode
        and an older episode row never lands after a newer one."""
        with self._lock:
            return bool(self._returned)

    def _offers_all(self, taken: dict[str, _Pending]) -> bool:
        """Whether this commit hands everything to the machine's committer (`_offer_all`):
        not for rows that came back from a failed commit (they are merged by key by this
        writer, after its claims are placed), nor for steps that may be stored already."""
        opts = self.options
        return (opts.handoff and not opts.dedupe_steps and bool(taken)
                and not any(p.failed for p in taken.values()))

    def _offer_all(self, taken: dict[str, _Pending], order: list[str]) -> None:
        """Offer the rows of `taken` to the machine's committer, waiting on no lock and no
        commit: the rows of upsert tables (episodes) and the waiting claims travel inline in
        the offer with the first slice of steps (uploaded here), sorted by how they are
        committed (`_row_kinds`), with whether the steps need none of them (`_ahead`), and the
        committer commits them in its round for every writer of the machine: claims before
        episodes, an episode's first row before its steps, its later rows after the round
        (`committer.NodeCommitter.round`). Later offers follow while it is in flight;
        once one comes back, this writer offers nothing until every offer is settled
        (`_held_back`), and merges what came back by key before anything newer of it is
        committed (no stale episode row wins, no step goes before its episode).
        Steps beyond what fits in flight stay pending (`MAX_IN_FLIGHT_BATCHES`). Raises with
        the rows not offered still in `taken` (the caller puts them back)."""
        opts = self.options
        upserts = {t: list(taken[t].parts) for t in order if t not in schema.APPEND_ONLY and taken[t].parts}
        appended = [t for t in order if t in schema.APPEND_ONLY]
        tokens, claim_rows = self.claims.offer()
        carried = False  # the upserts and claims are in an offer

        def hand(table: str | None, parts: list[_Part], fragments: list, rows: pa.Table | None) -> None:
            nonlocal carried
            ride = not carried and bool(upserts or tokens)
            kinds, keys = self._row_kinds({t: _rows(t, ps) for t, ps in upserts.items()}, claim_rows) if ride else ({}, {})
            self._offers += 1
            offer = committer.offer(
                self._spool.dir, f"{self._offers:08d}-{table or 'rows'}", table, 0 if rows is None else rows.num_rows,
                fragments, **kinds, claims=claim_rows if ride else None, ahead=_ahead(rows, kinds))
            flight = _Flight(table, parts, offer, dict(upserts) if ride else {}, list(tokens) if ride else [])
            with self._lock:
                self._flights.append(flight)
            if ride:
                carried = True
                for t in upserts:
                    del taken[t].parts[:len(upserts[t])]
                self._note_offered(keys)

        try:
            for table in appended:
                pending = taken[table]
                for parts in _slices(list(pending.parts), opts.batch_rows, opts.batch_bytes):
                    if self._in_flight_full() or self._held_back():
                        break  # the rest waits for the committer (see `_commit`)
                    rows = _rows(table, parts)
                    hand(table, parts, committer.write(self.lake, table, rows, opts.batch_rows), rows)
                    del pending.parts[:len(parts)]
            if not carried and (upserts or tokens):
                hand(None, [], [], None)
        finally:
            if not carried:
                self.claims.offer_settled(tokens, placed=False)
            self._restore({t: p for t, p in taken.items() if p.parts})
            taken.clear()
        if self.node_committer is not None:
            self.node_committer.wake()

    def _row_kinds(self, upserts: dict[str, pa.Table], claim_rows: pa.Table | None
                   ) -> tuple[dict[str, dict[str, pa.Table]], dict[str, list[tuple]]]:
        """Sort an offer's rows of upsert tables by how its committer commits them
        (`committer.ROW_KINDS`): rows of a key an earlier offer of this writer carried are
        updates; rows of an episode whose claim rides in this offer are inserts (minted
        here, so no row of it is stored anywhere); the rest upserts. Returns the offer's
        keyword arguments and the keys it carries (noted once it is offered:
        `_note_offered`). Every row of a key in one offer is of one kind."""
        new_ids = set(claim_rows.column("episode_id").to_pylist()) if claim_rows is not None else set()
        kinds: dict[str, dict[str, pa.Table]] = {}
        keys_of: dict[str, list[tuple]] = {}
        for table, rows in upserts.items():
            names = schema.KEYS[table]
            keys = list(zip(*(rows.column(n).to_pylist() for n in names), strict=True))
            offered = self._offered.get(table, set())
            kind_of = ["updates" if key in offered
                       else "inserts" if names == ("episode_id",) and key[0] in new_ids
                       else "upserts" for key in keys]
            for kind in set(kind_of):
                kinds.setdefault(kind, {})[table] = rows.filter(pa.array([k == kind for k in kind_of]))
            keys_of[table] = keys
        return kinds, keys_of

    def _note_offered(self, keys: dict[str, list[tuple]]) -> None:
        """Remember the keys an offer carried: their later rows are updates (`_row_kinds`).
        Forgetting is always safe (a forgotten key's rows are merged before the steps, as
        anyone's), so past `OFFERED_KEYS_KEPT` keys a table's set starts again."""
        for table, found in keys.items():
            offered = self._offered.setdefault(table, set())
            if len(offered) + len(found) > OFFERED_KEYS_KEPT:
                offered.clear()
            offered.update(found)

    def _claims_aside(self) -> None:
        """Delete released claims (and, without hand-offs, place new episodes' claims) on a
        thread of their own (a round of `_claims` commits takes a second or two on a busy
        store): the writer's thread never waits for a release. With hand-offs the machine's
        committer places new claims, from the writer's offers (`_offer_all`); a commit by the
        writer itself still places whatever is left before any row (`ClaimBook.place`)."""
        placing = not self.options.handoff  # with hand-offs, the committer places them (`_offer_all`)
        if not ((placing and self.claims.waiting) or self.claims.releasing):
            return
        if self._claiming is not None and not self._claiming.done():
            return
        now = time.monotonic()
        if now - self._claimed_at < self.options.max_age_s / 2:
            return  # a round at most every half batch age: more claims per commit, fewer commits
        self._claimed_at = now
        if self._claimer is None:
            self._claimer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lake-writer-claims")

        def work() -> None:
            try:
                if placing:
                    self.claims.place()
                self.claims.drop_released()
            except Exception as exc:  # tried again at the next tick, and by the next commit
                log.debug("placing or releasing claims failed; tried again: %s", exc)

        self._claiming = self._claimer.submit(work)

    def _upsert_together(self, table: str, rows: pa.Table) -> None:
        """Upsert `rows` in one commit with every other writer of this machine upserting into
        `table` now (`group_commit.together`): one merge for all of them, not one each
        queued behind the others."""
        lake = self.lake
        group_commit.together(claims.shared_lock(lake, table, "upsert"), self._spool.dir, table, "upsert", rows,
                              lambda merged: tables.commit(lake, table, merged, "upsert", locked=True))

    def _write_ahead(self, taken: dict[str, _Pending], order: list[str]) -> _Ahead | None:
        """Start writing the data files of the first hand-off slice on the uploader thread,
        when commits must land before it is offered (the claims of new episodes, the episode
        rows): the upload then overlaps them instead of following them. Writing data files
        makes nothing visible; only the offer's commit does, and it still waits its turn.
        Not while a claim may still be lost (rows of a lost claim are set aside, never
        uploaded)."""
        table = next((t for t in order if self._handoff(t, taken[t])), None)
        if table is None or self._in_flight_full() or self.claims.may_lose():
            return None
        if not (self.claims.waiting or order.index(table) > 0):
            return None  # nothing to overlap
        opts = self.options
        parts = _slices(list(taken[table].parts), opts.batch_rows, opts.batch_bytes)[0]
        if self._uploader is None:
            self._uploader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lake-writer-upload")
        future = self._uploader.submit(committer.write, self.lake, table, _rows(table, parts), opts.batch_rows)
        return _Ahead(parts, future)

    def _age_loop(self) -> None:
        """The writer's committer thread: replay dead writers' spools (a lake on an object
        store: here, once the store answers, not in the open); commit full batches as soon as
        an append says so, rows that waited `max_age_s`, and everything while a flush waits;
        settle hand-offs; become the machine's committer when there is none. After a failure,
        retry with growing waits (a full disk, a store that is down) until it works again,
        however often appends knock meanwhile; a flush asks for a try at once."""
        interval = min(self.options.max_age_s / 2, 0.5)
        tick = min(interval, 0.1) if self.options.handoff else interval
        backoff = 0.0  # seconds between tries while commits fail; 0 while they work
        retry_at = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            woken = self._due.wait(max(tick, retry_at - now) if backoff else tick)
            if self._stop.is_set():
                return
            self._due.clear()
            if self._retry_now:
                self._retry_now = False
                retry_at = 0.0
            try:
                self._elect()
            except OSError as exc:
                log.warning("could not take the committer's lock: %s", exc)
            if backoff and time.monotonic() < retry_at:
                continue  # failing: the next try waits its turn
            try:
                if self.fatal is not None:
                    raise self.fatal
                if not self._registered:
                    self._register()
                if not self.replay_done.is_set():
                    self._replay_orphans()
                if self._flights:
                    with self._commit_lock:
                        back = self._settle_flights()
                    woken = woken or back
                # new episodes' claims go now, not with their first rows, and released ones
                # go on the side (both share their commits with the machine's other writers)
                self._claims_aside()
                # an append that saw a full batch may have knocked after this thread took it, or
                # while a returned offer held this writer back (`_held_back`)
                woken = self._full_batch()
                urgent = self._flushing > 0 or self._eager
                if urgent or woken or backoff or self._due_by_age(self.options.max_age_s):
                    eager, self._eager = self._eager, False
                    now_all = urgent or woken or backoff
                    if not self._commit(only=None, older_than=None if now_all else self.options.max_age_s) and eager:
                        self._eager = True  # held back: it goes once the offers ahead are settled
                backoff = 0.0
            except Exception as exc:
                self._failures += 1
                self.last_error = exc  # a failure before any commit (`_register`) is one too
                # one line per failure; the traceback once per run of failures, and only for a
                # failure the lake did not already explain (a store that cannot be reached, 403, 404)
                first = backoff == 0.0 and not isinstance(exc, EpisodeLakeError)
                backoff = min(max(backoff, interval) * 2, MAX_RETRY_WAIT_S)
                retry_at = time.monotonic() + backoff
                log.warning("background commit failed; rows stay in the spool, retrying in %.1f s: %s",
                            backoff, exc, exc_info=first)
            finally:
                self._run_waiters()
                with self._progress:
                    self._progress.notify_all()

    def _full_batch(self) -> bool:
        opts = self.options
        with self._lock:
            return any(p.rows >= opts.batch_rows or p.bytes >= opts.batch_bytes for p in self._pending.values())

    def _due_by_age(self, age: float) -> bool:
        with self._lock:
            now = time.monotonic()
            return any(now - p.since >= age for p in self._pending.values())

    # -- lifecycle ---------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Commit what is left (`flush(timeout)`) and let go of the spool; if the lake does
        not take the last rows, they stay in the spool for the next writer (or `elake
        recover`) to replay, and the `CommitFailed` says how many. If this process is the
        machine's committer, it commits what is offered and hands over."""
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            self._stop.set()
            self._due.set()
            self._ager.join()
            self._closed = True
            self.claims.closed = True
            with self._lock:
                self._waiters.clear()
            with self._elect_lock:
                node, self.node_committer = self.node_committer, None
            if node is not None:
                node.stop()
            with self._commit_lock:
                self._settle_flights()
            self._cut = None  # every pending row, not only those before a boundary
            for pending in self._take(None).values():
                for part in pending.parts:
                    part.segment.close()  # uncommitted: left for replay
            for part in self._offered_parts():
                part.segment.close()  # offered: committed by the committer, or merged at replay
            if self._uploader is not None:
                self._uploader.shutdown()
            if self._claimer is not None:
                self._claimer.shutdown()
            try:  # what the claims thread had not deleted yet
                self.claims.drop_released()
            except Exception as exc:
                log.warning("releasing finished episodes' claims failed (their rows are committed; "
                            "the claims go with the next writer's replay of nothing, or --release-claims): %s", exc)
            self._spool.close()

    def __enter__(self) -> LakeWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
