"""Writers upload, one committer per machine commits: many writers' rows in one Lance version.

Lance commits one version of a dataset at a time (a conditional write of the next manifest;
a loser reloads and tries again), so writers that each commit their own batches only add
conflicts as they are added. What Lance offers many writers instead (its "distributed
write"): write the data files in parallel without committing (`lance.fragment.write_fragments`,
which returns each fragment's metadata) and have one process append many fragments in one
commit (`LanceDataset.commit(..., LanceOperation.Append(fragments), read_version=...)`).

Here, for the append-only tables (`schema.APPEND_ONLY`: steps), a writer's committer thread:
1. **uploads**: writes a batch's rows as data files into the table's folder in the store.
   They are in no version yet: no reader sees them, and a crash leaves only unreferenced
   files (Lance's `cleanup_old_versions(delete_unverified=True)` removes them);
2. **offers**: puts the fragments' metadata in `<name>.offer.json` in its own spool folder
   (written aside and renamed, so an offer is whole or absent);
3. the machine's committer **takes** every offer of every writer (`.taken.json`, under the
   commit lock), appends them all to the table in one commit, and
4. marks them **done** (`.done.json`); the writer then deletes the spool segments that held
   those rows, and the file. A commit that fails marks its offers **retry** (`.retry.json`):
   it may have landed or not (a hung store says neither), so the writer commits those rows
   itself with a key-checked merge (`insert_missing`), which stores each key exactly once
   either way.

Rows of upsert tables (episodes) and the claims of a writer's new episodes
(`claims.ClaimBook.offer`) travel in the offer too, inline, sorted by the writer by how they
are committed (`ROW_KINDS`): the first row of an episode it minted (inserted: appended, no
merge), the first row of any other (upserted: merged by key), a later row of an episode it
offered before (updated). A round, for every offer it took:
1. appends the claims, then the inserts, then merges the upserts, one commit per table, on a
   helper thread, while it appends the fragments of the offers that need none of those rows
   (`_split_round`: most of them; a paced collector's episode boundary offers the next
   episode's first row without its steps, `LakeWriter.episode_boundary`);
2. appends the other offers' fragments (one commit per table);
3. hands the updates to its `UpdateLane`, which merges them after the round, off its path.
So no writer's thread waits on a lock or a commit before it offers (profiled at 8 writers
before: ~870 ms queued to place claims and ~600 ms for the episodes merge, per pass), no step
is visible before its episode, nor an episode before its claim, and the steps of a round
carrying an episode boundary are visible after one append, not after the claims, the merge and
the append one after another (at 8 paced writers on a store 25 ms away, freshness p99 2.1 s ->
1.56-1.75 s). A failure in the first phase sends every offer of the round back (retry), with
nothing after it committed. A writer keeps offering while its earlier offers are in flight;
once one comes back, it keeps that `.retry` file until all its later offers are settled and
offers nothing meanwhile, and a round (and the lane) sends back every offer of a folder
holding a `.retry` file (`_scan`): so what comes back is merged by its writer before anything
newer of it is committed (no step before its episode, no older episode row over a newer one).

Where the committer lives: one per machine and lake, in whichever writer process holds the
flock on the lake's `committer` lock on this machine (`layout.lock_path`; each writer tries to take it at every tick of its
thread, so when the committer's process exits or dies, another writer's process takes over
within a tick). A lone writer is its own committer: its offers are committed by its own
process a tick later, one commit per many batches as before. Writers on other machines have
their own spool root and so their own committer; the committers of different machines
commit against each other exactly as writers did (Lance rebases one append on another).

Exactly once, whatever dies when (every acknowledged row stays in its writer's spool until
its fragment is known committed):
- a writer killed after uploading and before offering: its spool is replayed (key-checked);
  the uploaded files stay unreferenced;
- a writer killed after offering: the committer may still commit the offer. Replay of its
  spool first takes the commit and update locks (`quiet`: no round and no merge of updates
  is running), withdraws the offers not yet taken and forgets the others (the lane skips
  them from then on), then replays the segments key-checked: what the committer already
  committed is found by its keys and not stored twice;
- a committer killed mid-round (before its commits, after the claims' append, after the
  first rows, after a steps' append, during or after the lane's merge of updates: stages
  "taken", "placed", "merged", "committed", "updating", "updated"): its `.taken` offers (an
  offer with updates stays taken until they are merged) are found by the next committer and
  marked retry (the writer, or the replay of a dead writer, merges them key-checked; a claim
  row placed twice is one claim, its release deletes both; a first row appended is found by
  its key);
- an offer committed twice cannot happen: an offer is taken once (a rename under the commit
  lock) and never offered again.

V2 manifest paths: the installed Lance (14) creates every dataset with them
(`enable_v2_manifest_paths` defaults to true in `lance.write_dataset`, which creates the
lake's tables), so finding the latest version of a table stays one ordered listing however
many versions pile up; every lake made with this release has them, and so do the commits
made here (a commit never changes a dataset's path scheme). A table made by a much older
Lance with V1 paths keeps them and still works (finding the latest version then lists every
manifest); `LanceDataset.migrate_manifest_paths_v2()` converts it in place. Nothing here runs
that on its own: it is a one-off step for a person, with no writer running.
"""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.ipc as ipc

from episodelake.lake.storage import claims, layout, schema, tables
from episodelake.lake.storage.store import Location, store_errors

log = logging.getLogger(__name__)

OFFER = ".offer.json"
TAKEN = ".taken.json"
DONE = ".done.json"
RETRY = ".retry.json"
STATES = (OFFER, TAKEN, DONE, RETRY)
#: `layout.lock_path` names: held by the machine's committer for its lifetime, and for one
#: commit round (and by a replay settling a dead writer), per lake and machine.
COMMITTER_LOCK = "committer"
COMMIT_LOCK = "commit"
#: Held by the committer's `UpdateLane` for each merge of updates, and by a replay settling a
#: dead writer (after the commit lock: `quiet`).
UPDATE_LOCK = "update"
#: Every this many rounds that merged episode rows, the committer compacts the merged tables
#: past `tables.MAX_FRAGMENTS` fragments: a fleet of collectors with no server beside it
#: would otherwise make every merge slower than the one before.
COMPACT_CHECK_EVERY = 16
#: How often the committer looks for offers (it commits every offer found in one round); after
#: a round it looks again at once, and starts the next one if offers came meanwhile (other
#: processes' offers cannot wake it: they waited this long after every round).
COMMIT_INTERVAL_S = 0.2

#: For the crash and fault tests: called with a stage name ("uploaded", "offered", "taken",
#: "placed", "merged", "committed"; the lane's "updating", "updated") at each step of a
#: hand-off, so a test process can kill itself exactly there (or fail the step).
stage_hook: Callable[[str], None] | None = None


def _stage(name: str) -> None:
    if stage_hook is not None:
        stage_hook(name)


# -- writer side -------------------------------------------------------------------------

def write(lake: Location, table: str, rows: pa.Table, max_rows_per_file: int) -> list:
    """Write `rows` as data files of `table`, in no version: nobody sees them until an offer
    of the returned fragments is committed, so this may run before (or beside) the commits
    that must land ahead of the offer."""
    path = layout.table_path(lake, table)
    with store_errors(lake):
        fragments = lance.fragment.write_fragments(
            rows, str(path), schema=rows.schema, mode="append", max_rows_per_file=max_rows_per_file,
            storage_options=None if lake.is_local else lake.storage_options)
    _stage("uploaded")
    return fragments


def offer(folder: Path, name: str, table: str | None, rows: int, fragments: list, *,
          upserts: dict[str, pa.Table] | None = None, inserts: dict[str, pa.Table] | None = None,
          updates: dict[str, pa.Table] | None = None, claims: pa.Table | None = None,
          ahead: bool = False) -> Path:
    """Offer written fragments of `table` to the machine's committer as
    `<folder>/<name>.offer.json` (written aside and renamed: whole or absent); returns the
    offer's path. Rows of upsert tables (episodes) ride inline, by how they are committed
    (`ROW_KINDS`): `inserts` appended and `upserts` merged before any fragment of the round,
    `updates` merged after it (`UpdateLane`); `claims`: claim rows appended before all of
    them (`claims.ClaimBook.offer`). All travel as Arrow IPC in base64: they are small.
    `ahead`: none of the fragments' rows belongs to an episode whose first row this offer
    carries, so they may be appended beside those rows (`_split_round`)."""
    path = folder / f"{name}{OFFER}"
    aside = folder / f".{name}.tmp"
    meta: dict = {"table": table, "rows": rows, "fragments": [f.to_json() for f in fragments]}
    for kind, given in zip(ROW_KINDS, (inserts, upserts, updates), strict=True):
        encoded = {t: _encode(r) for t, r in (given or {}).items() if r.num_rows}
        if encoded:
            meta[kind] = encoded
    if claims is not None and claims.num_rows:
        meta["claims"] = _encode(claims)
    if ahead:
        meta["ahead"] = True
    text = json.dumps(meta)
    carries = "claims" in meta or any(kind in meta for kind in ROW_KINDS)
    aside.write_text(ROWS_MARK + text if carries else text)
    os.replace(aside, path)
    _stage("offered")
    return path


#: How an offer's rows of upsert tables are committed, in its round's order:
#: - "inserts": rows of episodes whose claim rides in the same offer (minted ids: no row of
#:   them was ever committed, and nobody else can hold them): appended, no merge;
#: - "upserts": rows of keys anyone may have stored (a caller-given id's first row): merged
#:   before the round's steps;
#: - "updates": rows of keys an earlier offer of the same writer carried (a finished
#:   episode's last row): its first row is committed by now or earlier in this round, so they
#:   are merged after the round's steps, off its path (`UpdateLane`).
ROW_KINDS = ("inserts", "upserts", "updates")
#: The kinds committed before the round's steps: an episode's first rows.
FIRST_ROWS = ("inserts", "upserts")


def _carries_first_rows(meta: dict) -> bool:
    """Whether an offer (its metadata) carries first rows of episodes (`FIRST_ROWS`)."""
    return any(meta.get(kind) for kind in FIRST_ROWS)

#: Opens an offer that carries rows of upsert tables or claims: not JSON, so a committer of an
#: older release on the machine (which would commit what it knows and drop the rest) finds it
#: unreadable and sends it back to its writer, which merges the rows by key (`_read_offer`).
ROWS_MARK = "rows+steps 2\n"
#: The mark of the release before, whose offers carried `upserts` and `claims` only: read too.
OLD_ROWS_MARK = "rows+steps\n"


def _read_offer(path: Path) -> dict:
    text = path.read_text()
    for mark in (ROWS_MARK, OLD_ROWS_MARK):
        if text.startswith(mark):
            return json.loads(text[len(mark):])
    return json.loads(text)


def _encode(rows: pa.Table) -> str:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, rows.schema) as out:
        out.write_table(rows)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")


def _decode(text: str) -> pa.Table:
    return ipc.open_stream(pa.py_buffer(base64.b64decode(text))).read_all()


def state(offer: Path) -> str | None:
    """Where the hand-off of `offer` (its path as offered) stands: one of `STATES`, or None
    when its file is gone (settled and removed)."""
    base = str(offer)[: -len(OFFER)]
    # in the order a hand-off moves (OFFER -> TAKEN -> DONE or RETRY; DONE is written before
    # TAKEN is removed): a move between two checks is then seen by the later one
    for suffix in (OFFER, TAKEN, DONE, RETRY):
        if os.path.exists(base + suffix):
            return suffix
    return None


def forget(offer: Path) -> None:
    base = str(offer)[: -len(OFFER)]
    for suffix in STATES:
        Path(base + suffix).unlink(missing_ok=True)


@contextmanager
def commit_lock(lake: Location, timeout_s: float | None = None) -> Iterator[bool]:
    """Hold the machine's commit lock (no committer is mid-round meanwhile). With
    `timeout_s`, yields False if it could not be had in time (the block must then not touch
    any hand-off)."""
    with _flock(lake, COMMIT_LOCK, timeout_s) as held:
        yield held


@contextmanager
def quiet(lake: Location, timeout_s: float | None = None) -> Iterator[bool]:
    """Hold the commit lock and the update lock: no round and no merge of updates
    (`UpdateLane`) runs meanwhile, so hand-off files may be settled (`settle_dead`). Yields
    False if both could not be had within `timeout_s` (each waits at most that long)."""
    with _flock(lake, COMMIT_LOCK, timeout_s) as committing:
        if not committing:
            yield False
            return
        with _flock(lake, UPDATE_LOCK, timeout_s) as updating:
            yield updating


@contextmanager
def _flock(lake: Location, name: str, timeout_s: float | None) -> Iterator[bool]:
    path = layout.lock_path(lake, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if deadline is None else fcntl.LOCK_NB))
                break
            except BlockingIOError:  # only with LOCK_NB, so only with a deadline
                assert deadline is not None
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(0.02)
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def settle_dead(folder: Path) -> int:
    """Under the commit and update locks (`quiet`): drop every hand-off file of a dead writer's spool folder, so
    no committer commits from it any more; its segments are then replayed key-checked (what
    was committed is found by its keys). Returns how many there were."""
    found = [p for p in folder.iterdir() if p.name.endswith(STATES)]
    for p in found:
        p.unlink(missing_ok=True)
    return len(found)


# -- the committer -----------------------------------------------------------------------

class NodeCommitter:
    """The machine's committer for one lake: a thread in the process that holds the
    committer lock (see the module docstring), and its `UpdateLane`."""

    def __init__(self, lake: Location, root: Path, fd: int, interval_s: float = COMMIT_INTERVAL_S):
        self.lake = lake
        self.root = root
        self._fd = fd
        self.interval_s = interval_s
        #: Lance versions this committer made, and the offers they carried
        self.commits = 0
        self.offers = 0
        self._merges = 0
        self._merged_tables: set[str] = set()
        self._merged_since_check = 0
        self._counting = threading.Lock()  # the counters above: the lane counts too
        self.last_error: BaseException | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lake-node-committer", daemon=True)
        self._lane = UpdateLane(self)
        #: commits a round's claims and first rows beside its leading steps (`_commit_first`)
        self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lake-node-rows")

    @classmethod
    def elect(cls, lake: Location, root: Path) -> NodeCommitter | None:
        """Become the machine's committer if none is running (the lock is free); else None."""
        path = layout.lock_path(lake, COMMITTER_LOCK)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        with commit_lock(lake):
            stale = list(root.glob(f"*/*{TAKEN}"))
            for taken in stale:  # a committer died mid-commit: landed or not, nobody knows
                _move(taken, RETRY)
        if stale:
            log.warning("%d hand-off(s) of a committer that died mid-commit go back to their writers, "
                        "to be merged by key", len(stale))
        committer = cls(lake, root, fd)
        committer._thread.start()
        log.info("this process commits the writers' fragments for %s on this machine", lake)
        return committer

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        again = False
        while not self._stop.is_set():
            if not again:
                self._wake.wait(self.interval_s)
            self._wake.clear()
            try:
                again = self.round() > 0 and bool(offered(self.root))
            except Exception as exc:  # the offers are marked retry; the loop goes on
                again = False
                log.warning("committer round failed: %s", exc)

    def round(self) -> int:
        """Commit every offer on this machine; returns how many (see the module docstring):
        the claims and first episode rows beside the fragments that need none of them
        (`_commit_first`), then the other fragments (one append per table), then the updates
        on the `UpdateLane`, off the round's path (those offers are done once they are merged).
        So a step is never visible before its episode, nor an episode before its claim. When
        the first phase fails, every offer of the round goes back (retry) and nothing after it
        is committed; when a later append fails, the offers of that table go back. A writer
        whose offer comes back merges its rows by key (the commits before may have landed)."""
        later: list[_Update] = []
        with commit_lock(self.lake):
            offers: list[tuple[Path, dict]] = []
            found, waiting = _scan(self.root)
            for offer in found:
                target = _move(offer, TAKEN)
                if target is None:
                    continue  # withdrawn meanwhile
                if target.parent in waiting:  # its writer merges what came back first
                    _move(target, RETRY)
                    continue
                try:
                    meta = _read_offer(target)
                except (OSError, ValueError) as exc:
                    log.error("unreadable hand-off %s (%s): its writer merges the rows by key", target, exc)
                    _move(target, RETRY)
                    continue
                offers.append((target, meta))
            if not offers:
                return 0
            _stage("taken")
            early, late = _split_round(offers)
            try:
                merged, appended = self._commit_first(offers, early)
            except Exception as exc:
                self.last_error = exc
                for target, _ in offers:
                    _move(target, RETRY)
                log.warning("committing the claims, first episode rows and leading steps of %d hand-off(s) "
                            "failed; their writers merge them by key: %s", len(offers), exc)
                return 0
            self.last_error = None
            if merged is not None:
                self._count(commits=1, merged=1)
            count = 0
            for target, meta in offers:
                if not (meta.get("table") and meta.get("fragments")):  # rows only: committed above, or by the lane
                    _settle(target, meta, "", None, merged, later)
                    count += 1
            for table, (batch, version) in appended.items():
                for target, meta in batch:
                    _settle(target, meta, table, version, merged, later)
                count += len(batch)
            for table, batch in late.items():
                try:
                    version = self._append(table, batch)
                except Exception as exc:
                    self.last_error = exc
                    for target, _ in batch:
                        _move(target, RETRY)
                    log.warning("committing %d hand-off(s) to %s failed; their writers merge them by key: %s",
                                len(batch), table, exc)
                    continue
                self.last_error = None
                for target, meta in batch:
                    _settle(target, meta, table, version, merged, later)
                count += len(batch)
            self._count(offers=count)
        self._lane.put(later)
        return count

    def _append(self, table: str, batch: list[tuple[Path, dict]]) -> int:
        """Append the fragments of `batch` (taken offers) to `table` in one commit; its version."""
        ds = append_fragments(self.lake, table, [f for _, meta in batch for f in meta["fragments"]])
        _stage("committed")
        self._count(commits=1)
        return ds.version

    def _count(self, commits: int = 0, offers: int = 0, merged: int = 0) -> None:
        with self._counting:
            self.commits += commits
            self.offers += offers
            self._merged_since_check += merged

    def _merge_name(self) -> str:
        """A name for one commit of episode rows (for the writers' commit counts)."""
        with self._counting:
            self._merges += 1
            return f"{os.getpid()}:{self._merges}"

    def compact_if_due(self) -> None:
        """Compact the tables this committer merges into, those past `tables.MAX_FRAGMENTS`
        fragments, every `COMPACT_CHECK_EVERY` commits of episode rows; on the lane's thread
        (beside the rounds, as the lane's merges are), never fatal (tried again later)."""
        with self._counting:
            if self._merged_since_check < COMPACT_CHECK_EVERY:
                return
            self._merged_since_check = 0
            merged_tables = sorted(self._merged_tables)
        for table in merged_tables:
            try:
                before, after = tables.compact(self.lake, table, above=tables.MAX_FRAGMENTS)
            except Exception as exc:
                log.warning("compacting %s failed; tried again after %d more merges: %s",
                            table, COMPACT_CHECK_EVERY, exc)
                continue
            if before > tables.MAX_FRAGMENTS:
                log.info("compacted %s: %d -> %d fragments", table, before, after)

    def _commit_first(self, offers: list[tuple[Path, dict]], early: dict[str, list[tuple[Path, dict]]]
                      ) -> tuple[str | None, dict[str, tuple[list[tuple[Path, dict]], int]]]:
        """The round's first phase: the claims and first rows (`_place_and_merge`) on the
        committer's helper thread while this one appends the leading fragments (`early`: see
        `_split_round`), so the steps of episodes already visible do not wait for them.
        Returns the name of the rows' commits and, per table, the early offers and the version
        that holds them; raises the first failure, once both are over (the caller sends every
        offer of the round back: what landed is found by its keys)."""
        rows = (self._helper.submit(self._place_and_merge, offers)
                if any(meta.get("claims") or _carries_first_rows(meta) for _, meta in offers) else None)
        appended: dict[str, tuple[list[tuple[Path, dict]], int]] = {}
        failed: BaseException | None = None
        try:
            for table, batch in early.items():
                appended[table] = (batch, self._append(table, batch))
        except Exception as exc:
            failed = exc
        merged = None
        if rows is not None:
            try:
                merged = rows.result()
            except Exception as exc:
                failed = failed or exc
        if failed is not None:
            raise failed
        return merged, appended

    def _place_and_merge(self, offers: list[tuple[Path, dict]]) -> str | None:
        """Append the offers' claim rows, then commit the rows that go before the round's
        steps, table by table in `tables.COMMIT_ORDER`: inserts appended (the last row of
        each key), upserts merged (each table's rows in offer order, the last row of a key
        winning). Returns a name for these commits (`_merge_name`), None when there were none."""
        placed = [_decode(meta["claims"]) for _, meta in offers if meta.get("claims")]
        if placed:
            claims.append_rows(self.lake, pa.concat_tables(placed, promote_options="none"))
            _stage("placed")
        inserts, upserts = _rows_of(offers, "inserts"), _rows_of(offers, "upserts")
        if not inserts and not upserts:
            return None
        with self._counting:
            self._merged_tables.update(inserts, upserts)
        for table in _in_order(inserts):
            rows = pa.concat_tables(inserts[table], promote_options="default")
            tables.commit(self.lake, table, tables.dedupe_last(rows, schema.KEYS[table]), "append")
        _upsert(self.lake, upserts)
        _stage("merged")
        return self._merge_name()

    def stop(self) -> None:
        """Commit what is offered now, merge its updates, stop, and let another process take over."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        try:
            self.round()
        except Exception as exc:
            log.warning("last committer round failed (the offers are merged by their writers): %s", exc)
        finally:
            try:
                self._helper.shutdown()
                self._lane.close()
            finally:
                os.close(self._fd)


@dataclass
class _Update:
    """A taken offer whose updates the lane merges before it is done."""

    target: Path
    meta: dict
    table: str
    version: int | None


#: How long the lane waits for updates before it looks whether a compaction is due.
LANE_IDLE_S = 1.0


class UpdateLane:
    """The committer's second thread: merges the offers' updates (rows of episodes an earlier
    offer carried: a finished episode's last row) after their round, so the next round's
    steps do not wait for them. At 8 writers on a store 25 ms away, a round carrying an
    episode boundary spent about half its 0.7-0.9 s on that merge, and the offers that came
    meanwhile waited for all of it before their own round began.

    Why that keeps every rule of a round: the first row of each of those episodes was
    committed by an earlier round, or by this one before its steps (`ROW_KINDS`), so no step
    is visible before its episode; updates are merged in the order their rounds took them
    (one thread, first in first out), and an offer holding updates stays taken until they are
    merged: a writer sees it done only then, and a committer that dies leaves it to its
    successor, which sends it back (merged by key by its writer, the steps found by theirs).
    A failed merge sends back every offer of it; later updates of a writer with an offer sent
    back go back too (its folder holds a `.retry` file), so its writer merges what came back
    before anything newer of it. Each merge holds the machine's update lock; a replay of a
    dead writer's spool takes it (after the commit lock: `quiet`) before it settles the
    writer's hand-offs, and the lane skips offers settled meanwhile, so no update of a dead
    writer lands over the replay of its rows."""

    def __init__(self, owner: NodeCommitter):
        self._owner = owner
        self._items: list[_Update] = []
        self._closing = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="lake-node-updates", daemon=True)
        self._thread.start()

    def put(self, items: list[_Update]) -> None:
        """Queue a round's offers with updates (none: the lane still looks whether a
        compaction is due, after every round)."""
        with self._cond:
            self._items += items
            self._cond.notify_all()

    def close(self) -> None:
        """Merge what is queued, then stop."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._items and not self._closing:
                    self._cond.wait(LANE_IDLE_S)
                batch, self._items = self._items, []
                if not batch and self._closing:
                    return
            if batch:
                try:
                    self._merge(batch)
                except Exception as exc:  # the lock itself failed: nothing merged, all goes back
                    log.error("merging the episode updates of %d hand-off(s) failed: %s", len(batch), exc)
                    for item in batch:
                        _move(item.target, RETRY)
            self._owner.compact_if_due()

    def _merge(self, batch: list[_Update]) -> None:
        owner = self._owner
        with _flock(owner.lake, UPDATE_LOCK, None):
            live = []
            sent_back: dict[Path, bool] = {}  # by writer folder: one listing each
            for item in batch:
                if not item.target.exists():
                    continue  # settled by the replay of its dead writer
                folder = item.target.parent
                if folder not in sent_back:
                    sent_back[folder] = _sent_back(folder)
                if sent_back[folder]:
                    _move(item.target, RETRY)
                    continue
                live.append(item)
            if not live:
                return
            try:
                _stage("updating")
                updates = _rows_of([(item.target, item.meta) for item in live], "updates")
                _upsert(owner.lake, updates)
                _stage("updated")
                with owner._counting:
                    owner._merged_tables.update(updates)
                owner._count(commits=1, merged=1)
                name = owner._merge_name()
                for item in live:
                    _mark_done(item.target, item.table, item.version, name)
            except Exception as exc:  # landed or not: what is not marked done goes back
                owner.last_error = exc
                for item in live:
                    _move(item.target, RETRY)
                log.warning("merging the episode updates of %d hand-off(s) failed; their writers merge them "
                            "by key: %s", len(live), exc)


def _split_round(offers: list[tuple[Path, dict]]) -> tuple[dict[str, list[tuple[Path, dict]]],
                                                          dict[str, list[tuple[Path, dict]]]]:
    """A round's offers with fragments, by table: those appended beside the round's claims
    and first rows (early) and those appended after them (late). An offer is early when none
    of its steps can belong to an episode whose first row is in this round: no earlier offer
    of its writer in the round carries first rows (inserts or upserts), and its own first
    rows, if any, are of episodes none of its steps belong to (the writer says so: "ahead").
    A paced collector's episode boundary offers the finished episode's last steps with its
    update and the next episode's first row: early, so most steps of a round that carries
    rows are visible after one append, not after the claims, rows and steps one by one."""
    early: dict[str, list[tuple[Path, dict]]] = {}
    late: dict[str, list[tuple[Path, dict]]] = {}
    blocked: set[Path] = set()  # writers with first rows earlier in this round
    for target, meta in offers:  # sorted: each writer's offers in the order it made them
        first = _carries_first_rows(meta)
        if meta.get("table") and meta.get("fragments"):
            ahead = target.parent not in blocked and (not first or meta.get("ahead"))
            (early if ahead else late).setdefault(meta["table"], []).append((target, meta))
        if first:
            blocked.add(target.parent)
    order = _in_order(early | late)
    return {t: early[t] for t in order if t in early}, {t: late[t] for t in order if t in late}


def _settle(target: Path, meta: dict, table: str, version: int | None, merged: str | None,
            later: list[_Update]) -> None:
    """After a round committed what of `target` goes before its steps, and its steps: done,
    or (with updates) queued for the lane, done once they are merged."""
    if meta.get("updates"):
        later.append(_Update(target, meta, table, version))
    else:
        _mark_done(target, table, version, merged if _carries_first_rows(meta) else None)


def _rows_of(offers: list[tuple[Path, dict]], kind: str) -> dict[str, list[pa.Table]]:
    """The offers' rows of one of `ROW_KINDS`, by table, in offer order."""
    rows: dict[str, list[pa.Table]] = {}
    for _, meta in offers:
        for table, text in (meta.get(kind) or {}).items():
            rows.setdefault(table, []).append(_decode(text))
    return rows


def _upsert(lake: Location, rows: dict[str, list[pa.Table]]) -> None:
    """Merge rows by key, one commit per table in `tables.COMMIT_ORDER` (each table's rows in
    offer order, the last row of a key winning)."""
    for table in _in_order(rows):
        tables.commit(lake, table, pa.concat_tables(rows[table], promote_options="default"), "upsert")


def _in_order(by_table: dict) -> list[str]:
    return [t for t in tables.COMMIT_ORDER if t in by_table] + sorted(set(by_table) - set(tables.COMMIT_ORDER))


def _sent_back(folder: Path) -> bool:
    """Whether a writer's folder holds an offer that came back (see `_scan`)."""
    try:
        with os.scandir(folder) as entries:
            return any(entry.name.endswith(RETRY) for entry in entries)
    except FileNotFoundError:
        return False


def offered(root: Path) -> list[Path]:
    """The offers in the writers' folders under `root`, sorted."""
    return _scan(root)[0]


def _scan(root: Path) -> tuple[list[Path], set[Path]]:
    """One listing of the writers' folders under `root`: their offers, sorted, and the
    folders holding an offer that came back (`.retry.json`, kept by the writer while later
    offers of it are out: those later offers go back too, so nothing of a writer is committed
    ahead of what it must merge first). A folder removed while it is listed (its writer
    closing: a closing writer has no offer left) is skipped; with a glob over all folders,
    one writer closing during a fleet's last round failed the whole round, and every other
    writer merged its own offers instead."""
    found: list[Path] = []
    sent_back: set[Path] = set()
    try:
        with os.scandir(root) as folders:
            paths = [entry.path for entry in folders]
    except FileNotFoundError:
        return found, sent_back
    for folder in paths:
        try:
            with os.scandir(folder) as entries:
                names = [entry.name for entry in entries]
        except (FileNotFoundError, NotADirectoryError):
            continue
        found += [Path(folder, name) for name in names if name.endswith(OFFER)]
        if any(name.endswith(RETRY) for name in names):
            sent_back.add(Path(folder))
    return sorted(found), sent_back


def _mark_done(taken: Path, table: str, version: int | None, merged: str | None = None) -> None:
    """Say which version holds the offer's rows (`.done.json`; `merged`: the round's merges
    of its episode rows), then drop the `.taken` file (a crash between the two leaves both:
    done wins, see `state`)."""
    base = str(taken)[: -len(TAKEN)]
    aside = taken.with_name(f".{taken.name}.tmp")
    aside.write_text(json.dumps({"table": table, "version": version, "merged": merged}))
    os.replace(aside, base + DONE)
    taken.unlink(missing_ok=True)


def committed_version(offer: Path) -> int | None:
    """The version that committed a `.done` offer (its path as offered)."""
    try:
        return json.loads(Path(str(offer)[: -len(OFFER)] + DONE).read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def committed_merge(offer: Path) -> str | None:
    """The committer's round that merged a `.done` offer's episode rows (None: it had none)."""
    try:
        return json.loads(Path(str(offer)[: -len(OFFER)] + DONE).read_text()).get("merged")
    except (OSError, ValueError):
        return None


def _move(path: Path, suffix: str) -> Path | None:
    """Rename a hand-off file to another state; None if it is gone."""
    name = path.name
    for s in STATES:
        if name.endswith(s):
            name = name[: -len(s)]
            break
    target = path.with_name(name + suffix)
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    return target


def append_fragments(lake: Location, table: str, fragments: list) -> lance.LanceDataset:
    """Append uploaded fragments (their JSON metadata) to `table` in one commit. An append
    rebases on any concurrent commit, so conflicts are rare; the few Lance reports are retried."""
    path = layout.table_path(lake, table)
    metas = [lance.fragment.FragmentMetadata.from_json(f if isinstance(f, str) else json.dumps(f))
             for f in fragments]

    def commit() -> lance.LanceDataset:
        ds = tables.dataset(path)
        return lance.LanceDataset.commit(ds, lance.LanceOperation.Append(metas), read_version=ds.version,
                                         storage_options=None if lake.is_local else lake.storage_options)

    with store_errors(lake):
        return tables.retry_commit(f"append {len(metas)} fragment(s) to {table}", commit)


