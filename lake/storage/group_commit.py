"""Group commit: concurrent small writes into one table of one lake share a Lance commit.

A Lance commit costs the same for one row as for fifty (a manifest written, the key index
consulted), and commits to one table are serialised anyway (each a conditional write of the
next manifest). So when twenty curators save at once, one commit per save means the last
waits for nineteen. Here the first caller to arrive for a table becomes its *leader*: it
takes every row queued for the table so far (its own included) and commits them as one;
callers arriving meanwhile queue, and when the commit ends the first of them leads the next
round with everything queued by then. Each caller returns when the commit holding its rows
is durable, or raises that commit's error, exactly as if it had committed alone.

Writes of one round reach the commit function in their arrival order, so two writes of one
key in a round end as the later one (`tables.dedupe_last`), as they would have one after the
other. A round holds what arrived while the one before committed: a lone caller commits at
once, without waiting to gather company. What a write is (rows, rows with the audit entries
they need) is the commit function's business: the queue only orders and hands them over.
The commit function may also answer each write on its own (`Outcome`): a value for its
caller, or an error for that caller alone (a write refused by a check made in the round,
whose rows it left out), while the others' rows are stored.

`together` does the same across the writer processes of one machine (their episode
upserts, claim rows and claim deletes), with request files in their spool folders and the
machine's per-table file lock: with 8 writers on one store, each writer's own commits of
`_claims` and `episodes` queued behind the others' (11 s per writer spent placing two
batches of claims, 5-6 s of it waiting for the lock), and the steps it offered waited
behind them.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.ipc as ipc

W = TypeVar("W")

#: What a commit function answers one write: its caller's return value, or an exception
#: raised in that caller only.
Outcome = Any


@dataclass(eq=False)
class _Waiting(Generic[W]):
    write: W
    done: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    error: BaseException | None = None
    outcome: Outcome = None

    def settle(self) -> Outcome:
        """This write's answer once its round ended: the round's error, its own, or its value."""
        if self.error is not None:
            raise self.error
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


class GroupCommit(Generic[W]):
    """The queues of one lake's tables (see the module docstring); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[Hashable, list[_Waiting[W]]] = {}
        self._busy: set[Hashable] = set()
        #: rounds committed and writes they held, for benchmarks and tests
        self.rounds = 0
        self.writes = 0

    def submit(self, key: Hashable, write: W,
               commit: Callable[[Sequence[W]], Sequence[Outcome] | None]) -> Outcome:
        """Commit `write` with whatever else is queued under `key` (a table and a kind of
        write); `commit` stores a round's writes, in arrival order, as one version, and may
        return one outcome per write (see the module docstring). Returns once durable, with
        this write's outcome (None when `commit` gave none)."""
        me = _Waiting(write)
        with self._lock:
            self._queues.setdefault(key, []).append(me)
            if key not in self._busy:
                self._busy.add(key)
                me.lead = True
        if not me.lead:
            me.done.wait()
            if not me.lead:  # committed in another caller's round
                return me.settle()
        with self._lock:
            batch = self._queues.pop(key)
        error: BaseException | None = None
        try:
            outcomes = commit([w.write for w in batch])
        except BaseException as exc:  # every caller of the round gets it, this one too
            error = exc
        else:
            for waiting, outcome in zip(batch, outcomes or [None] * len(batch), strict=True):
                waiting.outcome = outcome
        with self._lock:
            self.rounds += 1
            self.writes += len(batch)
            following = self._queues.get(key)
            if following:
                following[0].lead = True
                following[0].done.set()
            else:
                self._busy.discard(key)
        for waiting in batch:
            waiting.error = error
            if waiting is not me:
                waiting.done.set()
        return me.settle()


# -- across processes: the writers of one machine share commits ------------------------

#: In a writer's spool folder: rows waiting for a shared commit (`together`), as an Arrow IPC
#: stream named `<arrival>-<writer>.<table>.<kind>.request` (never `.arrows`: those are the
#: spool's segments, which a replay commits).
REQUEST_SUFFIX = ".request"


def together(lock: Path, folder: Path, table: str, kind: str, rows: pa.Table,
             commit: Callable[[pa.Table], None]) -> int:
    """Commit `rows` together with the same kind of rows every other writer process of this
    machine is waiting to commit to `table`: the group commit above, across processes. Each
    writer puts its rows in a request file in its spool folder (`folder`) and takes the
    machine's lock on the table (`lock`, the same lock its lone commits take); the first to
    get it commits every request found under the spool root in one commit (`commit(rows)`,
    called with the lock held) and deletes them; a writer whose request is gone when it gets
    the lock was committed by another and returns at once. A failed commit leaves the other
    writers' requests for them to commit (each then leads with what is waiting); this
    writer's is removed and the error raised, the rows staying in its spool, as after any
    failed commit. Returns how many requests the commit held (0: another writer committed
    this one).

    Requests are copies of rows already in their writers' spools, so a writer that dies
    leaves nothing to lose: the replay of its spool removes its requests under the same lock
    (`withdraw`) before it replays the rows. A leader that dies mid-commit leaves the requests
    it took for the next leader, which commits them again: fit for writes that may land
    twice (upserts, claim rows, deletes), never for blind appends."""
    name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:6]}.{table}.{kind}{REQUEST_SUFFIX}"
    path = folder / name
    aside = folder / f".{name}"
    with pa.OSFile(str(aside), "wb") as sink, ipc.new_stream(sink, rows.schema) as out:
        out.write_table(rows)
    os.replace(aside, path)
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        with open(lock, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                if not path.exists():
                    return 0  # committed by another writer's round
                found = _requests(folder.parent, f".{table}.{kind}{REQUEST_SUFFIX}")
                taken = []
                for request in found:
                    try:
                        with pa.memory_map(str(request)) as source:
                            taken.append((request, ipc.open_stream(source).read_all()))
                    except (OSError, pa.ArrowInvalid):
                        continue  # withdrawn, or half gone: its writer commits it itself
                commit(pa.concat_tables([t for _, t in taken], promote_options="none"))
                for request, _ in taken:
                    request.unlink(missing_ok=True)
                return len(taken)
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
    finally:
        path.unlink(missing_ok=True)


def _requests(root: Path, suffix: str) -> list[Path]:
    """Request files ending in `suffix` in the writer folders under spool root `root`, oldest
    first (a writer's own requests never wait two at a time, so their order is kept)."""
    found: list[Path] = []
    try:
        with os.scandir(root) as folders:
            paths = [entry.path for entry in folders if not entry.name.startswith(".")]
    except FileNotFoundError:
        return found
    for folder in paths:
        try:
            with os.scandir(folder) as entries:
                # a name starting with "." is a request still being written (`together`
                # renames it into place when whole): taking it would commit it twice
                found += [Path(entry.path) for entry in entries
                          if entry.name.endswith(suffix) and not entry.name.startswith(".")]
        except (FileNotFoundError, NotADirectoryError):
            continue
    return sorted(found, key=lambda p: p.name)


def withdraw(folder: Path, lock_of: Callable[[str, str], Path]) -> int:
    """Remove a dead writer's requests, each under the lock its leader takes
    (`lock_of(table, kind)`), so no leader commits them after its spool is replayed. Returns
    how many there were."""
    gone = 0
    for request in sorted(folder.glob(f"*{REQUEST_SUFFIX}")):
        table, kind = request.name.lstrip(".").split(".")[1:3]
        lock = lock_of(table, kind)
        lock.parent.mkdir(parents=True, exist_ok=True)
        with open(lock, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                request.unlink(missing_ok=True)
                gone += 1
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
    return gone
