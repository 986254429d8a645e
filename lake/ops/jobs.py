"""Job records: one row in the `jobs` table per long job (an export, a re-run, an import, a
judge back-fill), wherever it runs: the command line, the API server or a notebook.

A row says what the job is (kind, params), who started it (who, host, pid), where it stands
(status, progress done/total, error), what came of it (result, a small summary; the kind's
own record stays in its table, `exports` or `runs`) and when (created, started, updated,
finished). Statuses: queued -> running -> done | failed | interrupted | cancelled.

The functions that do the work (`run_export`, `run_rerun`, `import_clawgui`, `backfill`)
each take a :class:`Job` or make their own, report progress through it and end it inside
`Job.recording()`, so every caller gets the same record; the API only adds threads.

A job is recorded once accepted: at its first progress report, which each kind sends when its
input checks passed, so a refused request (an unknown set, an empty selection) leaves no row.
Progress is written at most every `progress_interval_s` (each write is a Lance commit);
status changes at once.

A process that dies leaves its jobs `running` in the table. Each process that runs jobs holds
an advisory lock (`_locks/jobs-<owner>.lock`, an :class:`Owner`) while it may run them and
stamps its rows with the owner's name. A queued or running row whose owner's lock is free
belongs to a process that is gone: every read shows it `interrupted` at once, and `reap`
records that (the server does at start-up). Locks live on the machine that runs the job
(under the lake folder, or this machine's state folder of a remote lake), so only jobs of
this machine's processes are judged; another machine's job on a shared lake reads as it was
last recorded.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from episodelake.lake.storage import layout
from episodelake.lake.storage.errors import EpisodeLakeError
from episodelake.lake.storage.layout import check_id
from episodelake.lake.storage.store import location

if TYPE_CHECKING:
    from episodelake.lake.storage.lake import Lake
    from episodelake.lake.storage.store import Location

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

ACTIVE = ("queued", "running")
#: Progress writes at most this often by default (seconds); the server has its own setting.
PROGRESS_INTERVAL_S = 5.0
INTERRUPTED = "Interrupted"
PROCESS_GONE = ("the process running this job stopped before it finished (killed or crashed); "
                "start it again")
#: What a failure the product did not mean to raise is recorded as: its details are in the log
#: of the process that ran it, not in a record every API client can read.
INTERNAL_ERROR = {"type": "InternalError",
                  "message": "internal error; the log of the process that ran it has the details"}


class JobStopped(Exception):
    """Raised inside a job's progress report once it was asked to stop (a server shutting
    down): the job ends `interrupted`."""


def _now() -> datetime:
    return datetime.now(UTC)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for this uid (containers)
        return f"uid {os.getuid()}"


# -- owners: who is still alive ------------------------------------------------------------------
class Owner:
    """An exclusive lock held for as long as its process may run jobs; rows name it in `owner`."""

    def __init__(self, lake_path: Location | Path):
        self.name = uuid.uuid4().hex
        self.path = layout.lock_path(lake_path, f"jobs-{self.name}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.pid = os.getpid()
        self._fh: IO | None = open(self.path, "a+")  # noqa: SIM115 - held until close()
        fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
            self.path.unlink(missing_ok=True)


_process_owners: dict[str, Owner] = {}
_process_owners_lock = threading.Lock()


def process_owner(lake_path: Location | Path) -> Owner:
    """This process's owner for the lake at `lake_path`, taken at its first job and held until
    the process exits (the operating system then lets the lock go)."""
    key = str(location(lake_path).resolve())  # a folder or an object store's URI
    with _process_owners_lock:
        owner = _process_owners.get(key)
        if owner is None or owner.pid != os.getpid():  # a forked child holds none of its own
            owner = _process_owners[key] = Owner(lake_path)
        return owner


def owner_alive(lake_path: Location | Path, owner: str | None) -> bool:
    """Whether the process that stamped `owner` still holds its lock."""
    return bool(owner) and layout.lock_state(layout.lock_path(lake_path, f"jobs-{owner}")) == "alive"


# -- one job as its process runs it --------------------------------------------------------------
class Job:
    """A job's record while this process runs it: what the row says, kept in memory and
    written when it is accepted, now and then as it progresses, and when it ends."""

    def __init__(self, lake: Lake, kind: str, *, job_id: str | None = None, params: dict | None = None,
                 who: str | None = None, owner: Owner | None = None,
                 progress_interval_s: float = PROGRESS_INTERVAL_S):
        self.lake = lake
        self.kind = kind
        self.job_id = check_id(job_id, "job_id") if job_id else f"{kind}-{uuid.uuid4().hex[:12]}"
        self.params = params or {}
        self.who = who or _user()
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.owner = owner or process_owner(lake.path)
        self.progress_interval_s = progress_interval_s
        self.created_at = self.updated_at = _now()
        self.started_at: datetime | None = None
        self.finished_at: datetime | None = None
        self.status = "queued"
        self.done = 0
        self.total: int | None = None
        #: {"type", "message"} once it failed or was interrupted.
        self.error: dict | None = None
        #: A small JSON summary of what it produced, set by the work before it ends.
        self.result: dict | None = None
        #: The product error it failed with, for a caller that answers with it.
        self.failure: EpisodeLakeError | None = None
        #: Set by whoever wants it stopped; the next progress report raises `JobStopped`.
        self.stop = threading.Event()
        #: Set once the job is accepted (recorded) or has ended, whichever comes first.
        self.settled = threading.Event()
        self.listeners: list[Progress] = []
        self.accepted = self.ended = self.final_written = False
        self._keep = False
        self._written_at = float("-inf")
        self._lock = threading.Lock()

    def listen(self, progress: Progress | None) -> Job:
        """Also tell `progress` (a progress bar) of each report."""
        if progress is not None:
            self.listeners.append(progress)
        return self

    # -- reporting ---------------------------------------------------------------------
    def progress(self, done: int, total: int) -> None:
        """`done` units of `total`; the first report accepts the job and records it."""
        if self.stop.is_set():
            raise JobStopped(f"the server stopped before {self.kind} {self.job_id} finished")
        now = _now()
        with self._lock:
            self.done, self.total, self.updated_at = done, total, now
            first = not self.accepted
            if first:
                self.status, self.accepted, self.started_at = "running", True, now
            due = first or time.monotonic() - self._written_at >= self.progress_interval_s
        if due:
            self._write()
        self.settled.set()
        for listener in self.listeners:
            listener(done, total)

    @contextmanager
    def recording(self) -> Iterator[Job]:
        """Run the job's work: on the way out it ends done, failed or interrupted, and the
        exception (if any) goes on. Nested uses end it once, at the innermost."""
        try:
            yield self
        except JobStopped as exc:
            self.end("interrupted", {"type": INTERRUPTED, "message": str(exc)})
            raise
        except KeyboardInterrupt:
            self.end("interrupted", {"type": INTERRUPTED, "message": "stopped by an interrupt (Ctrl-C)"})
            raise
        except EpisodeLakeError as exc:
            self.failure = self.failure or exc
            self.end("failed", {"type": exc.kind, "message": str(exc)})
            raise
        except BaseException:
            if not self.ended:
                log.exception("%s %s failed", self.kind, self.job_id)
            self.end("failed", dict(INTERNAL_ERROR))
            raise
        else:
            self.end("done")

    def end(self, status: str, error: dict | None = None) -> None:
        """Its final status (the first call wins). Recorded if it was accepted, kept
        (`keep_record`) or done; a job refused before its first report leaves no row."""
        with self._lock:
            if self.ended:
                return
            self.status, self.error = status, error
            self.finished_at = self.updated_at = _now()
            self.ended = True
            record = self.accepted or self._keep or status == "done"
        if record:
            self._write_final()
        self.settled.set()

    def keep_record(self) -> None:
        """Record this job whatever its end (a caller was told its id), now if it ended."""
        with self._lock:
            self._keep = True
            ended = self.ended
        if ended:
            self._write_final()

    # -- the row -----------------------------------------------------------------------
    def row(self) -> dict:
        with self._lock:
            return {"job_id": self.job_id, "kind": self.kind, "status": self.status, "done": self.done,
                    "total": self.total, "error": _dumps(self.error), "params": _dumps(self.params),
                    "who": self.who, "owner": self.owner.name, "created_at": self.created_at,
                    "updated_at": self.updated_at, "finished_at": self.finished_at,
                    "started_at": self.started_at, "host": self.host, "pid": self.pid,
                    "result": _dumps(self.result)}

    def view(self) -> dict:
        return view(self.row())

    def _write(self) -> None:
        """A failed progress write is logged, never fatal to the job."""
        try:
            self.lake.upsert("jobs", [self.row()])
            self._written_at = time.monotonic()
        except (EpisodeLakeError, OSError) as exc:
            log.warning("%s %s: could not record progress: %s", self.kind, self.job_id, exc)

    def _write_final(self) -> None:
        with self._lock:
            if self.final_written:
                return
            self.final_written = True
        try:
            self.lake.upsert("jobs", [self.row()])
        except (EpisodeLakeError, OSError):
            log.exception("%s %s: could not record that it %s", self.kind, self.job_id, self.status)


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else None


# -- reading -------------------------------------------------------------------------------------
def view(row: dict) -> dict:
    """A jobs-table row as readers see it: JSON parsed, progress as {done, total}."""
    return {"job_id": row["job_id"], "kind": row["kind"], "status": row["status"],
            "progress": {"done": row["done"] or 0, "total": row["total"]},
            "error": _loads(row["error"]), "params": _loads(row["params"]), "result": _loads(row.get("result")),
            "who": row["who"], "host": row.get("host"), "pid": row.get("pid"),
            "created_at": row["created_at"], "started_at": row.get("started_at"),
            "updated_at": row["updated_at"], "finished_at": row["finished_at"]}


def _gone(lake: Lake, rows: list[dict]) -> set[str]:
    """Owners of the active rows among `rows` whose process is gone. Only this machine's
    processes can be told (their locks are here): a job another machine runs on a shared
    lake reads as that machine last recorded it."""
    here = socket.gethostname()
    owners = {row["owner"] for row in rows if row["status"] in ACTIVE and row.get("host") in (None, here)}
    return {owner for owner in owners if not owner_alive(lake.path, owner)}


def _as_interrupted(row: dict) -> dict:
    """A row whose process died, as it reads: interrupted, last seen at its last write."""
    return {**row, "status": "interrupted", "error": json.dumps({"type": INTERRUPTED, "message": PROCESS_GONE}),
            "finished_at": row["updated_at"]}


def _settled(lake: Lake, rows: list[dict]) -> list[dict]:
    gone = _gone(lake, rows)
    return [_as_interrupted(r) if r["status"] in ACTIVE and r["owner"] in gone else r for r in rows]


def list_jobs(lake: Lake, *, kind: str | None = None, status: str | None = None,
              limit: int | None = 200) -> list[dict]:
    """Recorded jobs (as `view`s), newest first; those of dead processes read `interrupted`."""
    where, params = [], []
    if kind:
        where.append("kind = ?")
        params.append(kind)
    if status and status not in (*ACTIVE, "interrupted"):  # those may change as they are read
        where.append("status = ?")
        params.append(status)
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    rows = lake.sql(f"SELECT * FROM jobs {clause}ORDER BY created_at DESC, job_id", params).to_pylist()
    out = [view(r) for r in _settled(lake, rows) if not status or r["status"] == status]
    return out if limit is None else out[:limit]


def get_job(lake: Lake, job_id: str) -> dict | None:
    """One recorded job as `view` shows it, or None."""
    rows = lake.sql("SELECT * FROM jobs WHERE job_id = ?", [job_id]).to_pylist()
    return view(_settled(lake, rows)[0]) if rows else None


def reap(lake: Lake) -> list[dict]:
    """Record `interrupted` for every queued or running job whose process is gone, and drop
    those processes' lock files; returns the jobs marked, as `view`s."""
    rows = lake.sql("SELECT * FROM jobs WHERE status IN ('queued', 'running')").to_pylist()
    gone = _gone(lake, rows)
    orphans = [{**_as_interrupted(r), "updated_at": _now()} for r in rows if r["owner"] in gone]
    if orphans:
        lake.upsert("jobs", orphans)
        log.warning("marked %d job(s) of stopped processes interrupted: %s", len(orphans),
                    ", ".join(r["job_id"] for r in orphans))
    for owner in gone:
        if owner:
            layout.lock_path(lake.path, f"jobs-{owner}").unlink(missing_ok=True)
    return [view(r) for r in orphans]
