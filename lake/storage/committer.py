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
(`claims.ClaimBook.offer`) travel in the offer too, inline: they are not appended blindly but
merged, and the committer's round does, for every offer it took, the claims' append, then one
merge per upsert table, then one append per table of fragments. So no writer's thread waits
on a lock or a commit before it offers (profiled at 8 writers before: ~870 ms queued to place
claims and ~600 ms for the episodes merge, per pass), a step is never visible before its
episode, nor an episode before its claim. A failed claims append or merge sends every offer of
the round back (retry), with nothing after it committed. A writer keeps offering while its
earlier offers are in flight; once one comes back, it keeps that `.retry` file until all its
later offers are settled and offers nothing meanwhile, and a round sends back every offer of a
folder holding a `.retry` file (`_scan`): so what comes back is merged by its writer
before anything newer of it is committed (no step before its episode, no older episode row
over a newer one).

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
  spool first takes the commit lock (so no committer is mid-commit), withdraws the offers
  not yet taken and forgets the others, then replays the segments key-checked: what the
  committer already committed is found by its keys and not stored twice;
- a committer killed mid-round (before its commits, after the claims' append, after the
  episodes' merge, after the steps' append: stages "taken", "placed", "merged", "committed"):
  its `.taken` offers are found by the next committer and marked retry (the writer, or the
  replay of a dead writer, merges them key-checked; a claim row placed twice is one claim,
  its release deletes both);
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
from contextlib import contextmanager
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.ipc as ipc

from episodelake.lake.storage import claims, layout, tables
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
#: Every this many rounds that merged episode rows, the committer compacts the merged tables
#: past `tables.MAX_FRAGMENTS` fragments: a fleet of collectors with no server beside it
#: would otherwise make every merge slower than the one before.
COMPACT_CHECK_EVERY = 16
#: How often the committer looks for offers (it commits every offer found in one round); after
#: a round it looks again at once, and starts the next one if offers came meanwhile (other
#: processes' offers cannot wake it: they waited this long after every round).
COMMIT_INTERVAL_S = 0.2

#: For the crash tests: called with a stage name ("uploaded", "offered", "taken", "placed",
#: "merged", "committed") at each step of a hand-off, so a test process can kill itself exactly there.
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
          upserts: dict[str, pa.Table] | None = None, claims: pa.Table | None = None) -> Path:
    """Offer written fragments of `table` to the machine's committer as
    `<folder>/<name>.offer.json` (written aside and renamed: whole or absent); returns the
    offer's path. `upserts`: rows of upsert tables (episodes) the committer merges before it
    appends any fragment of its round; `claims`: claim rows it appends before those
    (`claims.ClaimBook.offer`). Both travel inline (Arrow IPC, base64): they are small."""
    path = folder / f"{name}{OFFER}"
    aside = folder / f".{name}.tmp"
    meta: dict = {"table": table, "rows": rows, "fragments": [f.to_json() for f in fragments]}
    if upserts:
        meta["upserts"] = {t: _encode(r) for t, r in upserts.items() if r.num_rows}
    if claims is not None and claims.num_rows:
        meta["claims"] = _encode(claims)
    text = json.dumps(meta)
    aside.write_text(ROWS_MARK + text if "upserts" in meta or "claims" in meta else text)
    os.replace(aside, path)
    _stage("offered")
    return path


#: Opens an offer that carries episode rows or claims: not JSON, so a committer of an older
#: release on the machine (which would append the steps and drop the rest) finds it unreadable
#: and sends it back to its writer, which merges it by key (`_read_offer`).
ROWS_MARK = "rows+steps\n"


def _read_offer(path: Path) -> dict:
    text = path.read_text()
    return json.loads(text[len(ROWS_MARK):] if text.startswith(ROWS_MARK) else text)


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
    """Hold the machine's commit lock (no committer is mid-commit meanwhile). With
    `timeout_s`, yields False if it could not be had in time (the block must then not touch
    any hand-off)."""
    path = layout.lock_path(lake, COMMIT_LOCK)
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
    """Under the commit lock: drop every hand-off file of a dead writer's spool folder, so
    no committer commits from it any more; its segments are then replayed key-checked (what
    was committed is found by its keys). Returns how many there were."""
    found = [p for p in folder.iterdir() if p.name.endswith(STATES)]
    for p in found:
        p.unlink(missing_ok=True)
    return len(found)


# -- the committer -----------------------------------------------------------------------

class NodeCommitter:
    """The machine's committer for one lake: a thread in the process that holds the
    committer lock (see the module docstring)."""

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
        self.last_error: BaseException | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lake-node-committer", daemon=True)

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
        committer = cls(lake, root, fd)
        with commit_lock(lake):
            stale = list(root.glob(f"*/*{TAKEN}"))
            for taken in stale:  # a committer died mid-commit: landed or not, nobody knows
                _move(taken, RETRY)
        if stale:
            log.warning("%d hand-off(s) of a committer that died mid-commit go back to their writers, "
                        "to be merged by key", len(stale))
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
        """Commit every offer on this machine; returns how many. In order: the offered claims
        (one append of `_claims`), the offered rows of upsert tables (one merge per table:
        episodes), then the fragments (one append per table: steps), so a step is never
        visible before its episode, nor an episode before its claim. When the claims or a
        merge fail, every offer of the round goes back (retry) and nothing after it is
        committed; when an append fails, the offers of that table go back. A writer whose
        offer comes back merges its rows by key (the commits before may have landed)."""
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
            try:
                merged = self._place_and_merge(offers)
            except Exception as exc:
                self.last_error = exc
                for target, _ in offers:
                    _move(target, RETRY)
                log.warning("committing the claims and episode rows of %d hand-off(s) failed; their writers "
                            "merge them by key: %s", len(offers), exc)
                return 0
            taken: dict[str, list[tuple[Path, dict]]] = {}
            count = 0
            for target, meta in offers:
                if meta.get("table") and meta.get("fragments"):
                    taken.setdefault(meta["table"], []).append((target, meta))
                else:  # rows of upsert tables only: committed above
                    _mark_done(target, "", None, merged if meta.get("upserts") else None)
                    count += 1
            if merged is not None:
                self.commits += 1
                self._merged_since_check += 1
            for table in [t for t in tables.COMMIT_ORDER if t in taken] + sorted(set(taken) - set(tables.COMMIT_ORDER)):
                batch = taken[table]
                try:
                    ds = append_fragments(self.lake, table, [f for _, meta in batch for f in meta["fragments"]])
                except Exception as exc:
                    self.last_error = exc
                    for target, _ in batch:
                        _move(target, RETRY)
                    log.warning("committing %d hand-off(s) to %s failed; their writers merge them by key: %s",
                                len(batch), table, exc)
                    continue
                self.last_error = None
                _stage("committed")
                for target, meta in batch:
                    _mark_done(target, table, ds.version, merged if meta.get("upserts") else None)
                self.commits += 1
                count += len(batch)
            self.offers += count
        if self._merged_since_check >= COMPACT_CHECK_EVERY:
            self._compact_merged()
        return count

    def _compact_merged(self) -> None:
        """Compact the tables this committer merges into, those past `tables.MAX_FRAGMENTS`
        fragments; between rounds, never fatal (tried again after the next merges)."""
        self._merged_since_check = 0
        for table in sorted(self._merged_tables):
            try:
                before, after = tables.compact(self.lake, table, above=tables.MAX_FRAGMENTS)
            except Exception as exc:
                log.warning("compacting %s failed; tried again after %d more merges: %s",
                            table, COMPACT_CHECK_EVERY, exc)
                continue
            if before > tables.MAX_FRAGMENTS:
                log.info("compacted %s: %d -> %d fragments", table, before, after)

    def _place_and_merge(self, offers: list[tuple[Path, dict]]) -> str | None:
        """Append the offers' claim rows, then merge their upsert rows, table by table in
        `tables.COMMIT_ORDER` (each table's rows in offer order, the last row of a key
        winning); returns a number naming this round's merges (for the writers' commit
        counts, with this process's id), None when there were none."""
        placed = [_decode(meta["claims"]) for _, meta in offers if meta.get("claims")]
        if placed:
            claims.append_rows(self.lake, pa.concat_tables(placed, promote_options="none"))
            _stage("placed")
        upserts: dict[str, list[pa.Table]] = {}
        for _, meta in offers:
            for table, text in (meta.get("upserts") or {}).items():
                upserts.setdefault(table, []).append(_decode(text))
        if not upserts:
            return None
        self._merged_tables.update(upserts)
        for table in [t for t in tables.COMMIT_ORDER if t in upserts] + sorted(set(upserts) - set(tables.COMMIT_ORDER)):
            tables.commit(self.lake, table, pa.concat_tables(upserts[table], promote_options="default"), "upsert")
        _stage("merged")
        self._merges += 1
        return f"{os.getpid()}:{self._merges}"

    def stop(self) -> None:
        """Commit what is offered now, stop, and let another process take over."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        try:
            self.round()
        except Exception as exc:
            log.warning("last committer round failed (the offers are merged by their writers): %s", exc)
        finally:
            os.close(self._fd)


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


