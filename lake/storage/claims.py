"""Episode claims: the right to write one episode's rows, exclusive across recorders,
processes and machines.

A recorder takes an episode's claim at `start_episode` and keeps it until every row it wrote
for the episode is committed to Lance (or, after a crash, until its spool is replayed). So
only one writer ever numbers an episode's steps, two processes starting one id at once end
with exactly one winner, and whoever takes a claim next reads a lake that already holds every
earlier row of the episode: a read decides whether the id is taken, and no commit per
episode is needed on a local lake.

Why not one `merge_insert` of the episode row: Lance 14 does not detect two concurrent
`merge_insert`s of the same new key (four processes inserting one key "when not matched" at
once stored it four times, in 30 trials of 30), so such an insert cannot pick a winner, and
nothing in Lance says whether another writer is still alive.

Two kinds, one contract (`take` -> `Claim` or None, `release`):
- a local lake: `FileClaim`, an flock on `<lake>/_locks/recording/<episode_id>.lock`. A
  crash releases the flock but leaves the file, which names the dead holder's spool folder,
  so the next holder waits for that spool's replay. Costs no commit.
- a lake on an object store, where nothing can be locked: `CommitClaim`, a row in the lake's
  `_claims` Lance dataset. A claimant appends its row (one commit) and then reads the
  version just before its own: Lance commits versions one after another (conditional writes
  on the store), so exactly the claims committed before it are there. It wins if none of
  them belongs to a live writer. A holder on this machine is known alive or dead (the
  flock on its spool folder, whose path the row holds); one on another machine counts as
  alive until its spool is replayed there (the replay deletes its claims:
  `release_holder`). Releasing deletes the row (one more commit). Machines are told apart
  by host name, so two machines writing one lake need distinct host names.

Ids the recorder mints need no claim at `start_episode` (`DeferredClaim`): a fresh uuid4
is unique by construction, so no other writer can be storing it, and nobody else can know it
before one of its rows is committed. On an object store its claim row is still written, but
later: it travels in the writer's next offer to the machine's committer, which appends the
claims of all its writers' offers in one commit at the start of its round (`ClaimBook.offer`;
a writer that commits rows itself places them first, `ClaimBook.place`), and always before
the first commit of any of the episode's rows: a
reader that can see the episode (and so could try to resume it) also sees the claim, exactly
as if it had been taken at the start. Releases are batched the same way (one delete for many
episodes). So `start_episode` with a minted id asks the store nothing and works during an
outage.

An id the caller gives may be anyone's, so its claim is taken at the start (`CommitClaim`).
While the store cannot be reached it is taken provisionally instead (`ProvisionalClaim`): a
note in the writer's spool folder, and the episode's rows are recorded as usual; the writer's
committer settles it before any of those rows is committed, exactly as `CommitClaim` decides
(`settle`: its claim row appended, the claims committed before it read), and it also loses
when the lake already holds the episode. A lost claim's rows are never committed: they are
set aside under the spool root (`spool.CONFLICTS_DIR`, listed by `elake recover`),
and the episode's next `log_step`/`finish` raises `Conflict`. A writer that dies with a claim
unsettled leaves its note in its spool, and the replay settles it before replaying any row.

The rule, whatever the kind: two processes can never both store rows of one episode id.
- a caller-given id: the claim (a lock, or a claim row checked against the earlier ones) is
  won before any row is committed: at the start, or, taken during an outage, when settled;
  the loser gets `Conflict` and commits nothing under that id (its rows are set aside);
- a minted id: nobody else can hold it, and its claim is in the lake before any of its rows,
  so a later `resume` of it by another writer is refused (or waits for a dead holder's
  replay) exactly as for a given id.

A machine that died with its spool lost never replays it, so its claims would hold their
episodes forever: `release_host` (`elake recover --release-claims HOST`) deletes them once a
person says the machine is gone; what it had acknowledged but not committed was in that
spool and is lost with it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

from episodelake.lake.storage import group_commit, layout, spool, tables
from episodelake.lake.storage.errors import Conflict, InvalidInput
from episodelake.lake.storage.sql import sql_in, sql_string
from episodelake.lake.storage.store import Location, StoreSilent, location, store_errors

log = logging.getLogger(__name__)
T = TypeVar("T")

CLAIMS_SCHEMA = pa.schema([
    pa.field("episode_id", pa.string(), nullable=False),
    pa.field("holder", pa.string(), nullable=False),  # the writer's spool folder name
    pa.field("host", pa.string(), nullable=False),  # the machine it runs on
    pa.field("spool", pa.string(), nullable=False),  # its spool folder on that machine
    pa.field("token", pa.string(), nullable=False),  # this claim
    pa.field("claimed_at", pa.timestamp("us", tz="UTC")),
])


class Claim:
    """What `take` hands back. `previous_holder`: the spool folder (on this machine) of a
    holder that died holding the claim; its rows must be replayed before the episode is read."""

    previous_holder: str | None = None
    #: set when a claim taken during an outage was settled and lost: why, for the `Conflict`
    lost: str | None = None

    def own(self, holder: str) -> None:
        """Record this writer (its spool folder) as the holder."""

    def release(self, *, committed: bool) -> None:
        """Let go. `committed`: every row written under this claim is in Lance."""


class FileClaim(Claim):
    """An flock on a file naming the holder's spool folder (see the module docstring)."""

    def __init__(self, path: Path, fd: int, previous_holder: str | None):
        self.path = path
        self.fd: int | None = fd
        self.previous_holder = previous_holder
        self.owned = False

    @classmethod
    def take(cls, lake: Location, episode_id: str) -> FileClaim | None:
        path = layout.lock_path(lake, f"recording/{episode_id}")
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            try:
                current = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                current = False
            if current:
                break
            os.close(fd)  # the holder removed the file while we opened it: take the new one
        previous = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        # only ever a spool folder's name; anything else is not ours to follow
        plain = previous and Path(previous).name == previous and not previous.startswith(".")
        return cls(path, fd, previous if plain else None)

    def own(self, holder: str) -> None:
        if self.fd is None:
            raise RuntimeError(f"{self.path}: the claim was released; take a new one")
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, holder.encode(), 0)
        self.owned = True

    def release(self, *, committed: bool) -> None:
        """Without `committed` the file stays, naming this writer's spool for the next holder
        to await."""
        if self.fd is None:
            return
        if committed and self.owned:
            self.path.unlink(missing_ok=True)
        os.close(self.fd)
        self.fd = None


class CommitClaim(Claim):
    """A row of the `_claims` dataset (see the module docstring)."""

    def __init__(self, lake: Location, episode_id: str, token: str):
        self.lake = lake
        self.episode_id = episode_id
        self.token = token
        self.released = False

    @classmethod
    def take(cls, lake: Location, episode_id: str, holder: str, *, token: str | None = None,
             wait_s: float | None = None, late: Callable[[bool], None] | None = None) -> CommitClaim | None:
        """The claim, or None when a live writer holds it (nothing of ours is left then).
        `token`: this claim's (a fresh one by default). `wait_s`: give up (`StoreUnavailable`)
        when the store has not answered by then (a store that accepts connections and never
        answers holds the requests for minutes). The abandoned append may still land: its
        row holds this token, so a provisional claim that follows takes the same token, and
        that row never holds the episode against it (`settle`) and goes with its release.
        `late(landed)` is called when the abandoned append ends (landed: see
        `ClaimBook.landed_late`)."""
        token = token or uuid.uuid4().hex
        row = pa.Table.from_pylist([_row(lake, episode_id, holder, token)], schema=CLAIMS_SCHEMA)
        if wait_s is None:
            before = _append_claims(lake, row)
        else:
            before = _within(wait_s, lake, f"claim episode {episode_id}", lambda: _append_claims(lake, row), late)
        claim = cls(lake, episode_id, token)
        for earlier in before:
            state = _holder_state(lake, earlier)
            if state in ("alive", "elsewhere"):
                log.info("episode %s is held by writer %s on %s", episode_id, earlier["holder"], earlier["host"])
                claim.release(committed=True)
                return None
            if state == "dead":
                claim.previous_holder = earlier["holder"]
            # "gone": its spool was replayed and the row is a leftover; it blocks nothing
        return claim

    def release(self, *, committed: bool) -> None:
        """Without `committed` the row stays: this writer's spool still holds rows of the
        episode, and whoever replays it releases the claim (`release_holder`)."""
        if self.released or not committed:
            return
        _delete(self.lake, f"token = {sql_string(self.token)}", f"release claim on episode {self.episode_id}")
        self.released = True


def append_rows(lake: Location, rows: pa.Table) -> None:
    """Append claim rows in one commit under the machine's lock for placing claims: the
    machine's committer placing the claims its writers offered (`ClaimBook.offer`)."""
    _append(lake, rows)


def _append(lake: Location, rows: pa.Table, *, folder: Path | None = None):
    """Append claim rows to the claims table (made when missing) in one commit; the dataset
    handle the append returned. `folder`: the writer's spool folder, to share the commit
    with the other writers of this machine placing theirs (`group_commit.together`; returns
    None then)."""
    with store_errors(lake):
        tables.ensure_table(lake, layout.CLAIMS_TABLE, CLAIMS_SCHEMA.empty_table())
    if folder is not None:
        group_commit.together(shared_lock(lake, layout.CLAIMS_TABLE, "place"), folder, layout.CLAIMS_TABLE,
                              "place", rows, lambda merged: _append_locked(lake, merged))
        return None
    with tables.file_lock(shared_lock(lake, layout.CLAIMS_TABLE, "place")):
        return _append_locked(lake, rows)


def _append_locked(lake: Location, rows: pa.Table, table: str = layout.CLAIMS_TABLE):
    import lance

    path = layout.table_path(lake, table)
    with store_errors(lake):
        return tables.retry_commit(f"append {rows.num_rows} row(s) to {table}", lambda: lance.write_dataset(
            rows, str(path), mode="append", storage_options=lake.storage_options))


def shared_lock(lake: Location, table: str, kind: str) -> Path:
    """The machine's lock that commits of `kind` into `table` take (a shared commit's
    leader, `group_commit.together`, and a lone commit alike): `tables.one_at_a_time`'s,
    except for claim rows placed (appends to `_claims`), which have a lock of their own.
    Deletes queue with deletes (two deletes from one fragment conflict) and take the place
    lock as well for their commit (`_delete_locked`), but a delete waiting for its turn
    holds only this one: appends placing claims never queue behind a queue of deletes (with
    8 writers each placing its own claims, one lock for both was busy more than all the
    time)."""
    if table == layout.CLAIMS_TABLE and kind == "place":
        return layout.lock_path(lake, f"commit-{table}-place")
    return layout.lock_path(lake, f"commit-{table}")


def _append_claims(lake: Location, rows: pa.Table) -> list[dict]:
    """Append claim rows in one commit; the claims of the same episodes committed before them."""
    ids = sorted(set(rows.column("episode_id").to_pylist()))
    mine = _append(lake, rows)
    with store_errors(lake):
        # from the handle the append returned: its session has read that version already
        return mine.checkout_version(mine.version - 1).to_table(filter=sql_in("episode_id", ids)).to_pylist()


def _within(wait_s: float, lake: Location, what: str, call: Callable[[], T],
            late: Callable[[bool], None] | None = None) -> T:
    """`call()`'s result, or `StoreUnavailable` when it has not returned within `wait_s`
    seconds. It goes on in a daemon thread; when it ends, `late(landed)` is called
    (`landed`: it succeeded)."""
    outcome: dict = {}
    guard = threading.Lock()

    def run() -> None:
        try:
            value = call()
        except BaseException as exc:  # handed to the caller below, or dropped once abandoned
            with guard:
                outcome["error"] = exc
                abandoned = outcome.get("abandoned", False)
            if abandoned and late is not None:
                late(False)
            return
        with guard:
            outcome["value"] = value
            abandoned = outcome.get("abandoned", False)
        if abandoned and late is not None:
            late(True)

    worker = threading.Thread(target=run, name="claim-attempt", daemon=True)
    worker.start()
    worker.join(wait_s)
    with guard:
        if "value" not in outcome and "error" not in outcome:
            outcome["abandoned"] = True
            raise StoreSilent(f"{what}: lake {lake.uri}: the store did not answer within {wait_s:.0f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _row(lake: Location, episode_id: str, holder: str, token: str) -> dict:
    folder = layout.spool_root(lake).resolve() / holder
    return {"episode_id": episode_id, "holder": holder, "host": layout.machine_id(), "spool": str(folder),
            "token": token, "claimed_at": datetime.now(UTC)}


class DeferredClaim(Claim):
    """The claim of an id the recorder minted, on an object store: written later by the
    writer's committer (`ClaimBook`), before any of the episode's rows (see the module
    docstring). Taking one asks the store nothing."""

    def __init__(self, book: ClaimBook, episode_id: str, holder: str, token: str | None = None):
        self.book = book
        self.episode_id = episode_id
        self.token = token or uuid.uuid4().hex
        self.row = _row(book.lake, episode_id, holder, self.token)

    def release(self, *, committed: bool) -> None:
        """A claim not yet written is dropped. A written one is deleted in the book's next
        batch when `committed`; without it the row stays for whoever replays this writer's
        spool (`release_holder`), as a `CommitClaim`'s does."""
        self.book.release(self, committed=committed)


#: In a writer's spool folder: a provisional claim waiting to be settled (`ProvisionalClaim`)
NOTE_PREFIX = "claim-"
NOTE_SUFFIX = ".json"
#: ... and one that was settled and lost: the replay sets its episode's rows aside
LOST_SUFFIX = ".lost.json"


class ProvisionalClaim(DeferredClaim):
    """The claim of a caller-given id taken while the store could not be reached: noted in
    the writer's spool folder at once (a local write), settled by the writer's committer
    (`ClaimBook.place` -> `settle`) before any of the episode's rows is committed. Won, it is
    a claim row like a deferred one; lost, `lost` says why (see the module docstring)."""

    def __init__(self, book: ClaimBook, episode_id: str, holder: str, folder: Path, fsync: bool, token: str):
        super().__init__(book, episode_id, holder, token)
        self.note = folder / f"{NOTE_PREFIX}{self.token}{NOTE_SUFFIX}"
        _write_note(self.note, self.row, fsync)

    def mark_lost(self, reason: str) -> None:
        self.lost = reason
        if self.note.exists():
            os.replace(self.note, self.note.with_name(self.note.name.replace(NOTE_SUFFIX, LOST_SUFFIX)))

    def forget_note(self) -> None:
        self.note.unlink(missing_ok=True)


def _write_note(path: Path, row: dict, fsync: bool) -> None:
    staging = path.with_name(f".{path.name}")
    with open(staging, "w") as fh:
        json.dump({**row, "claimed_at": row["claimed_at"].isoformat()}, fh)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(staging, path)


def _read_note(path: Path) -> dict:
    row = json.loads(path.read_text())
    return {**row, "claimed_at": datetime.fromisoformat(row["claimed_at"])}


def settle(lake: Location, rows: list[dict]) -> dict[str, str | None]:
    """Decide claims taken while the store was down (rows as `_row` makes them, distinct
    episode ids), with one commit of their rows and one read: by episode id, None for a claim
    won, else why it was lost. A lost claim's row is deleted again (one more commit). The
    rule is `CommitClaim.take`'s: the claims committed before ours win unless their writer's
    spool was replayed ("gone"); a dead writer's spool still holds rows of the episode, so
    that claim wins too. With no earlier claim standing, a claim is lost when the lake
    already holds the episode (its claim was released once its rows were committed)."""
    ids = [r["episode_id"] for r in rows]
    before = _append_claims(lake, pa.Table.from_pylist(rows, schema=CLAIMS_SCHEMA))
    reasons: dict[str, str | None] = dict.fromkeys(ids)
    ours = {r["token"] for r in rows}
    for earlier in before:
        if earlier["token"] in ours:  # a failed attempt of this very claim that landed after all
            continue
        state = _holder_state(lake, earlier)
        if state != "gone":
            reasons[earlier["episode_id"]] = (f"recorder {earlier['holder']} on {earlier['host']} claimed it "
                                              f"first ({'its spool awaits replay' if state == 'dead' else 'still recording'})")
    unsettled = [i for i, why in reasons.items() if why is None]
    if unsettled and tables.has_table(lake, "episodes"):
        with store_errors(lake):
            stored = tables.dataset(layout.table_path(lake, "episodes")).to_table(
                columns=["episode_id"], filter=sql_in("episode_id", unsettled)).column("episode_id").to_pylist()
        for episode_id in stored:
            reasons[episode_id] = "the lake already holds it (another recorder stored it)"
    lost = [r["token"] for r in rows if reasons[r["episode_id"]] is not None]
    if lost:
        _delete(lake, sql_in("token", lost), f"withdraw {len(lost)} lost claim(s)")
    return reasons


def _holder_state(lake: Location, row: dict) -> str:
    """"alive", "dead", "gone" (see `spool.writer_state`), or "elsewhere" (another machine's)."""
    theirs = Path(row["spool"])
    ours = row["host"] == layout.machine_id() and theirs.parent == layout.spool_root(lake).resolve()
    return spool.writer_state(theirs) if ours else "elsewhere"


def settle_noted(lake: Location, folder: Path) -> set[str]:
    """For the replay of dead writer `folder`: settle the claims it noted and never settled,
    and return the episode ids of its lost claims, whose rows the replay sets aside (the
    won ones are claim rows of that writer, released by `release_holder` after the replay)."""
    notes = sorted(p for p in folder.glob(f"{NOTE_PREFIX}*{NOTE_SUFFIX}")
                   if not p.name.endswith(LOST_SUFFIX))
    lost = {_read_note(p)["episode_id"] for p in folder.glob(f"{NOTE_PREFIX}*{LOST_SUFFIX}")}
    if notes:
        rows = [_read_note(p) for p in notes]
        reasons = settle(lake, rows)
        for path, row in zip(notes, rows, strict=True):
            why = reasons[row["episode_id"]]
            if why is None:
                path.unlink()
            else:
                log.error("episode %s, recorded by dead writer %s while the store was down: %s; its rows "
                          "are set aside, not stored", row["episode_id"], folder.name, why)
                os.replace(path, path.with_name(path.name.replace(NOTE_SUFFIX, LOST_SUFFIX)))
                lost.add(row["episode_id"])
    return lost


class ClaimBook:
    """A writer's deferred claims: handed to the machine's committer in the writer's next
    offer (`offer`, `offer_settled`), or written in one commit before the writer's own next
    commit of rows (`place`), and deleted in one commit after they are released
    (`drop_released`). All run on the writer's threads (or in `flush`), never in
    `start_episode`."""

    def __init__(self, lake: Location, folder: Path | None = None):
        self.lake = lake
        #: the writer's spool folder: its claim rows and deletes share commits with the other
        #: writers of this machine (`group_commit.together`); None: committed alone
        self.folder = folder
        self._lock = threading.Lock()
        self._placing = threading.Lock()
        self._dropping = threading.Lock()
        self._waiting: dict[str, DeferredClaim] = {}  # by token: not yet in the lake
        self._placed: set[str] = set()  # tokens in the lake, still held
        self._releasing: set[str] = set()  # tokens in the lake, to delete
        self._provisional: dict[str, ProvisionalClaim] = {}  # by token: taken during an outage, unsettled
        #: by token: in an offer to the machine's committer, which places them in its round
        #: (`offer`, `offer_settled`); released meanwhile: `_dropped_offered`
        self._offered: dict[str, DeferredClaim] = {}
        self._dropped_offered: set[str] = set()
        self._lost: set[str] = set()  # episode ids whose provisional claim was lost
        #: set when the writer closes: nothing batches releases any more, so they are done at once
        self.closed = False
        self._together = 0  # `together()` blocks open: their releases wait for its end

    def take(self, episode_id: str, holder: str) -> DeferredClaim:
        claim = DeferredClaim(self, episode_id, holder)
        with self._lock:
            self._waiting[claim.token] = claim
        return claim

    def take_provisional(self, episode_id: str, holder: str, folder: Path, fsync: bool, token: str) -> ProvisionalClaim:
        """A caller-given id's claim while the store cannot be reached (see the module
        docstring); `token`: that of the claim attempt that failed, whose row may have landed."""
        with self._lock:
            lost = episode_id in self._lost
        if lost:  # its rows are set aside by this writer: new ones would be too
            raise Conflict(f"episode {episode_id}: its claim was lost by this recorder (another recorder "
                           "holds or stored it; the rows recorded here are set aside): record under a new id")
        claim = ProvisionalClaim(self, episode_id, holder, folder, fsync, token)
        with self._lock:
            self._provisional[claim.token] = claim
        return claim

    def landed_late(self, token: str) -> None:
        """A claim row of `token` landed after its attempt was given up: deleted with the next
        batch unless the claim still holds (its release deletes every row of its token)."""
        with self._lock:
            held = token in self._provisional or token in self._placed
            if not held:
                self._releasing.add(token)
            now = self.closed and not self._together
        if not held and now:
            self.drop_released()

    def lost_ids(self) -> set[str]:
        """Episodes whose claim was settled and lost: none of their rows may be committed."""
        with self._lock:
            return set(self._lost)

    def release(self, claim: DeferredClaim, *, committed: bool) -> None:
        with self._lock:
            if self._waiting.pop(claim.token, None) is not None:
                return  # never written: nothing to delete
            if claim.token in self._offered:  # its row may be landing now: deleted once settled
                if committed:
                    self._dropped_offered.add(claim.token)
                return
            if self._provisional.get(claim.token) is claim:
                if committed:  # nothing of the episode waits (its start failed): no claim to settle
                    del self._provisional[claim.token]
                    assert isinstance(claim, ProvisionalClaim)
                    claim.forget_note()
                return  # else the note stays for whoever replays this writer's spool
            if committed and claim.token in self._placed:
                self._placed.discard(claim.token)
                self._releasing.add(claim.token)
            now = self.closed and not self._together
        if now:
            self.drop_released()

    @contextmanager
    def together(self) -> Iterator[None]:
        """Releases made inside are deleted in one commit at the end, also after the writer
        closed: a closing recorder lets go of all its episodes at once. One delete per
        episode, with every writer of a fleet closing at the same time, was most of a fleet's
        run (deletes of one table are commits that queue one behind the other)."""
        with self._lock:
            self._together += 1
        try:
            yield
        finally:
            with self._lock:
                self._together -= 1
                now = self.closed and not self._together
            if now:
                self.drop_released()

    def may_lose(self) -> bool:
        """Whether rows waiting to be committed may belong to an episode whose claim is or
        may be lost (a provisional claim not yet settled, or one settled and lost): such rows
        must be set aside before anything of theirs is uploaded."""
        with self._lock:
            return bool(self._provisional or self._lost)

    @property
    def unsettled(self) -> bool:
        """Whether provisional claims wait to be settled (`place`, on the writer's thread)."""
        with self._lock:
            return bool(self._provisional)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    @property
    def releasing(self) -> int:
        with self._lock:
            return len(self._releasing)

    def offer(self) -> tuple[list[str], pa.Table | None]:
        """Hand the waiting claims to the machine's committer: their tokens and rows, which
        the writer puts in its offer (`committer.offer`); the committer appends them in its
        round before the rows of that round, so each claim is in the lake before any row of
        its episode. Settled by `offer_settled`. None while provisional claims wait: those
        must be settled (`place`) first."""
        with self._placing, self._lock:
            if self._provisional or not self._waiting:
                return [], None
            waiting, self._waiting = self._waiting, {}
            self._offered.update(waiting)
        return list(waiting), pa.Table.from_pylist([c.row for c in waiting.values()], schema=CLAIMS_SCHEMA)

    def offer_settled(self, tokens: list[str], *, placed: bool) -> None:
        """The offer that carried `tokens` was committed (`placed`), or came back (its claim
        append may have landed or not: the claims wait again, and go in with the writer's next
        commit before any row, a second row of one token changing nothing)."""
        with self._lock:
            for token in tokens:
                claim = self._offered.pop(token, None)
                if claim is None:
                    continue
                if token in self._dropped_offered:  # released while offered: delete it if it landed
                    self._dropped_offered.discard(token)
                    self._releasing.add(token)
                elif placed:
                    self._placed.add(token)
                else:
                    self._waiting[token] = claim

    def place(self) -> int:
        """Settle the provisional claims, then write every waiting claim in one commit (raises,
        with nothing lost, when the store does not take it); returns how many were written.
        Calls take turns (the writer's claims thread and its commits)."""
        with self._placing:
            return self._place()

    def _place(self) -> int:
        self._settle_provisional()
        with self._lock:
            waiting = dict(self._waiting)
        if not waiting:
            return 0
        _append(self.lake, pa.Table.from_pylist([c.row for c in waiting.values()], schema=CLAIMS_SCHEMA),
                folder=self.folder)
        with self._lock:
            for token in waiting:
                if self._waiting.pop(token, None) is not None:
                    self._placed.add(token)
                else:  # released while being written: delete it with the next batch
                    self._releasing.add(token)
        return len(waiting)

    def _settle_provisional(self) -> None:
        with self._lock:
            pending = list(self._provisional.values())
        if not pending:
            return
        reasons = settle(self.lake, [c.row for c in pending])
        for claim in pending:
            why = reasons[claim.episode_id]
            with self._lock:
                del self._provisional[claim.token]
                if why is None:
                    self._placed.add(claim.token)
                else:
                    self._lost.add(claim.episode_id)
            if why is None:
                claim.forget_note()
                log.info("episode %s: its claim, taken while the store was down, is settled", claim.episode_id)
            else:
                claim.mark_lost(why)

    def drop_released(self) -> int:
        """Delete the released claims in one commit; returns how many."""
        with self._dropping:
            return self._drop_released()

    def _drop_released(self) -> int:
        with self._lock:
            tokens = sorted(self._releasing)
        if not tokens:
            return 0
        if self.folder is not None and self.folder.exists():
            lake = self.lake

            def delete(merged: pa.Table) -> None:
                every = sorted(set(merged.column("token").to_pylist()))
                _delete_locked(lake, sql_in("token", every), f"release {len(every)} claim(s)")

            group_commit.together(shared_lock(lake, layout.CLAIMS_TABLE, "release"), self.folder,
                                  layout.CLAIMS_TABLE, "release",
                                  pa.table({"token": tokens}, schema=_TOKENS), delete)
        else:
            _delete(self.lake, sql_in("token", tokens), f"release {len(tokens)} claim(s)")
        with self._lock:
            self._releasing.difference_update(tokens)
        return len(tokens)


def _delete(lake: Location, where: str, what: str) -> None:
    with tables.one_at_a_time(lake, layout.CLAIMS_TABLE):
        _delete_locked(lake, where, what)


def _delete_locked(lake: Location, where: str, what: str) -> None:
    """Delete claim rows, holding the table's lock (the caller) and the lock for placing
    claims: an append racing a delete rebases on it after a failed conditional write, and at
    8 writers the committer's claims append took 0.7-1.5 s instead of 0.2 s whenever the
    writers' releases landed beside it; waiting for one delete costs less."""
    path = layout.table_path(lake, layout.CLAIMS_TABLE)
    with tables.file_lock(shared_lock(lake, layout.CLAIMS_TABLE, "place")), store_errors(lake):
        tables.retry_commit(what, lambda: tables.dataset(path).delete(where))


_TOKENS = pa.schema([pa.field("token", pa.string(), nullable=False)])


def take(lake: Location | Path | str, episode_id: str, holder: str, *,
         minted_into: ClaimBook | None = None, token: str | None = None,
         wait_s: float | None = None, late: Callable[[bool], None] | None = None) -> Claim | None:
    """`episode_id`'s claim for the writer whose spool folder is `holder`, or None when a live
    writer holds it. `minted_into`: the id was minted by the caller (a fresh uuid4), so on an
    object store its claim is deferred to that writer's book (asks the store nothing).
    `token`, `wait_s`, `late`: see `CommitClaim.take`."""
    loc = location(lake)
    if loc.is_local:
        return FileClaim.take(loc, episode_id)
    if minted_into is not None:
        return minted_into.take(episode_id, holder)
    return CommitClaim.take(loc, episode_id, holder, token=token, wait_s=wait_s, late=late)


def release_holder(lake: Location | Path | str, holder: str) -> None:
    """Delete the claims of a writer whose spool was just replayed (a remote lake's; a local
    lake's claim files are taken over by the next holder)."""
    loc = location(lake)
    if loc.is_local or not tables.has_table(loc, layout.CLAIMS_TABLE):
        return
    _delete(loc, f"holder = {sql_string(holder)}", f"release claims of writer {holder}")


def release_host(lake: Location | Path | str, host: str) -> list[dict]:
    """Delete the claims held by writers on machine `host` (rows as they were), for a machine
    that is gone with its spool. Refused for this machine while a writer holding one is
    running, or has left a spool here (`recover` replays it and releases its claims)."""
    loc = location(lake)
    if loc.is_local:
        raise InvalidInput("--release-claims: a lake in a local folder has no claims to release "
                           "(its claims are locks that a crashed writer lets go by itself)")
    if not host.strip():
        raise InvalidInput("--release-claims: give the host name of the machine that is gone")
    if not tables.has_table(loc, layout.CLAIMS_TABLE):
        return []
    with store_errors(loc):
        rows = tables.dataset(layout.table_path(loc, layout.CLAIMS_TABLE)).to_table(filter=f"host = {sql_string(host)}").to_pylist()
    if host == layout.machine_id():
        held = [r for r in rows if spool.writer_state(Path(r["spool"])) != "gone"]
        if held:
            r = held[0]
            raise Conflict(f"--release-claims: {len(held)} claim(s) of {host} (this machine) belong to "
                           f"writers that are running or left a spool here, e.g. {r['holder']} on episode "
                           f"{r['episode_id']}: stop them, then run `elake recover`, which replays their "
                           "spools and releases their claims")
    if rows:  # by token: a claim taken after this read is not touched
        _delete(loc, sql_in("token", [r["token"] for r in rows]), f"release the claims of {host}")
    if tables.has_table(loc, layout.MACHINES_TABLE):  # the machine's id is free again
        path = layout.table_path(loc, layout.MACHINES_TABLE)
        with tables.one_at_a_time(loc, layout.MACHINES_TABLE), store_errors(loc):
            tables.retry_commit(f"free machine id {host}",
                                lambda: tables.dataset(path).delete(f"machine = {sql_string(host)}"))
    return rows


#: The lake's `_machines` dataset: one row per machine id taken (`register_machine`), the
#: first committed row of an id holding it; `token` is the machine's (kept in its local folder
#: for the lake, `MACHINE_NOTE`).
MACHINES_SCHEMA = pa.schema([
    pa.field("machine", pa.string(), nullable=False),
    pa.field("token", pa.string(), nullable=False),
    pa.field("spool", pa.string(), nullable=False),  # its spool root on that machine
    pa.field("registered_at", pa.timestamp("us", tz="UTC")),
])
MACHINE_NOTE = "machine.json"
tables.REMOTE_TABLES.update({layout.CLAIMS_TABLE: CLAIMS_SCHEMA, layout.MACHINES_TABLE: MACHINES_SCHEMA})


class MachineIdTaken(Conflict):
    """Another machine writes this lake under the same machine id."""


def _machine_token(lake: Location) -> tuple[Path, dict]:
    """This machine's token for the lake (made once, in its local folder), and the note."""
    note = layout.local_state(lake) / MACHINE_NOTE
    try:
        return note, json.loads(note.read_text())
    except (OSError, ValueError):
        pass
    made = {"token": uuid.uuid4().hex, "registered": []}
    aside = note.with_name(f".{note.name}.{os.getpid()}")
    aside.write_text(json.dumps(made))
    try:
        os.link(aside, note)  # the first process of this machine makes it; the others read it
    except FileExistsError:
        pass
    finally:
        aside.unlink(missing_ok=True)
    return note, json.loads(note.read_text())


def register_machine(lake: Location | Path | str) -> None:
    """Take this machine's id (`layout.machine_id`) in a remote lake, or raise
    `MachineIdTaken` when another machine took it first. Two machines under one id would
    each judge the other's claims as their own (and their spools as gone): both could store
    one episode. Asked of the store once per machine and lake (noted in `MACHINE_NOTE`); the
    writer's thread calls it before its first commit."""
    loc = location(lake)
    if loc.is_local:
        return
    machine = layout.machine_id()
    note_path, note = _machine_token(loc)
    if machine in note.get("registered", []):
        return
    with tables.file_lock(layout.lock_path(loc, "machine")):  # one process of this machine asks
        _register(loc, machine, note_path)


def _register(loc: Location, machine: str, note_path: Path) -> None:
    note = json.loads(note_path.read_text())
    if machine in note.get("registered", []):
        return  # another process of this machine did, while this one waited
    token, where = note["token"], f"machine = {sql_string(machine)}"
    with store_errors(loc):
        tables.ensure_table(loc, layout.MACHINES_TABLE, MACHINES_SCHEMA.empty_table())
        path = layout.table_path(loc, layout.MACHINES_TABLE)
        rows = tables.dataset(path).to_table(filter=where).to_pylist()
        if not any(r["token"] == token for r in rows):
            row = {"machine": machine, "token": token, "spool": str(layout.spool_root(loc).resolve()),
                   "registered_at": datetime.now(UTC)}
            with tables.one_at_a_time(loc, layout.MACHINES_TABLE):
                mine = _append_locked(loc, pa.Table.from_pylist([row], schema=MACHINES_SCHEMA), layout.MACHINES_TABLE)
            rows = mine.to_table(filter=where).to_pylist()  # in commit order: the first row holds the id
    first = rows[0]
    if first["token"] != token:
        raise MachineIdTaken(
            f"machine id {machine!r} ({layout.MACHINE_ENV}, else the host name) is already taken in lake "
            f"{loc} by another machine (spool {first['spool']}, since {first['registered_at']:%Y-%m-%d %H:%M} UTC): "
            f"two machines under one id could both store one episode. Give each machine its own "
            f"{layout.MACHINE_ENV}; if that machine is gone with its spool, `elake recover --release-claims "
            f"{machine}` frees the id. Nothing recorded here is lost: it waits in this machine's spool")
    note["registered"] = sorted({*note.get("registered", []), machine})
    aside = note_path.with_name(f".{note_path.name}.{os.getpid()}")
    aside.write_text(json.dumps(note))
    os.replace(aside, note_path)
