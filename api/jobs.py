"""Background jobs (exports, re-runs; later imports and judging): one thread each, every job
recorded in the lake's `jobs` table, the one job record for every kind.

A job's row says what it is (kind, params, who asked), where it stands (status, progress
done/total, error) and when (created, updated, finished). Statuses: queued | running | done |
failed | interrupted | cancelled (`schema.JOB_STATUSES`). The kind's own result stays in its
own table (`exports`, `runs`); the job row is how it got there.

Durability without a commit per tick: status changes are written at once, progress at most
every `Settings.job_progress_interval_s` (each write is a Lance commit). Between writes, this
server answers with the live progress it holds in memory.

A server killed hard leaves its jobs `running` in the table. Each server holds an advisory
lock (`_locks/jobs-<owner>.lock`) for its lifetime and stamps its jobs with that owner; at
start-up a server marks `interrupted` every queued or running job whose owner's lock is free
(its server is gone), and leaves alone the jobs of servers still alive on the same lake.

A job is recorded once it is accepted: its first progress report, which `run_export` and
`run_rerun` send when their input checks passed. Starting waits for that (up to
`Settings.job_start_wait_s`), so an unknown set or an empty selection is answered as the
request's error and leaves no job behind. One job of each kind runs at a time in a server: a
second start is refused (409), naming the job that runs. At shutdown, running jobs are told
to stop at their next progress report and end `interrupted`.
"""

from __future__ import annotations

import fcntl
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO

from episodelake.lake import layout
from episodelake.lake.errors import Conflict, LakeError
from episodelake.lake.lake import Lake

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
#: What a job runs: a function of its progress callback. Its return value is not kept: the
#: result is in the lake.
Work = Callable[[Progress], object]
#: Called at start-up for each job of a kind found interrupted (to fix that kind's record).
OnInterrupted = Callable[[Lake, dict], None]

ACTIVE = ("queued", "running")
INTERRUPTED_BY_DEATH = {"type": "Interrupted", "message": "the server running this job stopped before it "
                        "finished (killed or crashed); start it again"}


class JobStopped(Exception):
    """Raised inside a job's progress report when the server shuts down."""


@dataclass
class Job:
    """A job this server runs: what the table says, plus what only this process knows."""

    job_id: str
    kind: str
    params: dict
    who: str | None
    created_at: datetime
    status: str = "queued"
    done: int = 0
    total: int | None = None
    #: {"type", "message"}, the API's error shape, when the job failed.
    error: dict | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    failure: LakeError | None = field(default=None, repr=False)
    accepted: bool = False  # the first progress report came: recorded from then on
    answered: bool = False  # start() returned it to the caller: its end must be recorded
    ended: bool = False
    final_written: bool = False
    written_at: float = field(default=float("-inf"), repr=False)
    #: Set by the first progress report (the job's input checks passed), or when it ends.
    checked: threading.Event = field(default_factory=threading.Event, repr=False)
    stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def row(self, owner: str) -> dict:
        return {"job_id": self.job_id, "kind": self.kind, "status": self.status, "done": self.done,
                "total": self.total, "error": json.dumps(self.error) if self.error else None,
                "params": json.dumps(self.params, sort_keys=True, default=str), "who": self.who,
                "owner": owner, "created_at": self.created_at, "updated_at": self.updated_at,
                "finished_at": self.finished_at}


def view(row: dict) -> dict:
    """A jobs-table row as the API shows it: JSON parsed, progress as {done, total}."""
    return {"job_id": row["job_id"], "kind": row["kind"], "status": row["status"],
            "progress": {"done": row["done"] or 0, "total": row["total"]},
            "error": json.loads(row["error"]) if row["error"] else None,
            "params": json.loads(row["params"]) if row["params"] else None, "who": row["who"],
            "created_at": row["created_at"], "updated_at": row["updated_at"],
            "finished_at": row["finished_at"]}


class Jobs:
    """The jobs of one lake as seen by one server: recorded ones and the ones it runs."""

    def __init__(self, lake: Lake, *, progress_interval_s: float = 5.0):
        self.lake = lake
        self.progress_interval_s = progress_interval_s
        self.owner = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._live: dict[str, Job] = {}
        self._threads: list[threading.Thread] = []
        self._owner_lock: IO | None = None

    # -- start-up and shutdown -----------------------------------------------------------
    def open(self, on_interrupted: dict[str, OnInterrupted] | None = None) -> list[dict]:
        """Hold this server's owner lock; mark the jobs of dead servers `interrupted`.

        Returns the jobs marked, as `view`s; `on_interrupted[kind]` is called for each."""
        path = layout.lock_path(self.lake.path, f"jobs-{self.owner}")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._owner_lock = open(path, "a+")  # noqa: SIM115 - held until stop()
        fcntl.flock(self._owner_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        rows = self.lake.sql("SELECT * FROM jobs WHERE status IN ('queued', 'running')").to_pylist()
        owners = {row["owner"] for row in rows}
        dead = {owner for owner in owners if not self._alive(owner)}
        now = datetime.now(UTC)
        orphans = [{**row, "status": "interrupted", "error": json.dumps(INTERRUPTED_BY_DEATH),
                    "updated_at": now, "finished_at": now} for row in rows if row["owner"] in dead]
        if orphans:
            self.lake.upsert("jobs", orphans)
            log.warning("marked %d job(s) of stopped servers interrupted: %s", len(orphans),
                        ", ".join(r["job_id"] for r in orphans))
        for owner in dead:
            if owner:
                layout.lock_path(self.lake.path, f"jobs-{owner}").unlink(missing_ok=True)
        for row in orphans:
            hook = (on_interrupted or {}).get(row["kind"])
            if hook is not None:
                try:
                    hook(self.lake, view(row))
                except LakeError as exc:
                    log.warning("%s %s: could not mark its record interrupted: %s", row["kind"], row["job_id"], exc)
        return [view(r) for r in orphans]

    def _alive(self, owner: str | None) -> bool:
        """Whether the server that stamped `owner` still holds its lock."""
        if not owner:
            return False
        path = layout.lock_path(self.lake.path, f"jobs-{owner}")
        if not path.exists():
            return False
        with open(path, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
            return False

    def stop(self, timeout_s: float) -> None:
        """Ask running jobs to stop at their next progress report; wait up to `timeout_s`;
        then give up the owner lock."""
        with self._lock:
            for job in self._live.values():
                job.stop.set()
            threads = list(self._threads)
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self._owner_lock is not None:
            self._owner_lock.close()
            self._owner_lock = None
            layout.lock_path(self.lake.path, f"jobs-{self.owner}").unlink(missing_ok=True)

    # -- reading -------------------------------------------------------------------------
    def get(self, job_id: str) -> dict | None:
        """One job as `view` shows it: live from this server when it runs it, else recorded."""
        with self._lock:
            job = self._live.get(job_id)
            if job is not None:
                return view(job.row(self.owner))
        rows = self.lake.sql("SELECT * FROM jobs WHERE job_id = ?", [job_id]).to_pylist()
        return view(rows[0]) if rows else None

    def of_kind(self, kind: str) -> dict[str, dict]:
        """This kind's jobs by id, recorded and live (live wins), newest first."""
        rows = self.lake.sql("SELECT * FROM jobs WHERE kind = ? ORDER BY created_at DESC", [kind]).to_pylist()
        out = {row["job_id"]: view(row) for row in rows}
        with self._lock:
            live = [j for j in self._live.values() if j.kind == kind]
        for job in live:
            out[job.job_id] = view(job.row(self.owner))
        return dict(sorted(out.items(), key=lambda kv: kv[1]["created_at"], reverse=True))

    def list(self, kind: str | None = None, status: str | None = None, limit: int = 200) -> list[dict]:
        """Recorded jobs, newest first, with this server's live progress."""
        where, params = [], []
        if kind:
            where.append("kind = ?")
            params.append(kind)
        if status:
            where.append("status = ?")
            params.append(status)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self.lake.sql(f"SELECT * FROM jobs {clause} ORDER BY created_at DESC, job_id LIMIT {int(limit)}",
                             params).to_pylist()
        with self._lock:
            live = {j.job_id: view(j.row(self.owner)) for j in self._live.values()}
        return [live.get(row["job_id"]) or view(row) for row in rows]

    # -- running -------------------------------------------------------------------------
    def start(self, kind: str, job_id: str, work: Work, *, wait_s: float, params: dict | None = None,
              who: str | None = None) -> dict:
        """Run `work` in a thread; raises its error if it fails its checks within `wait_s`."""
        with self._lock:
            busy = next((j for j in self._live.values() if j.kind == kind and not j.ended), None)
            if busy is not None:
                raise Conflict(f"{kind} {busy.job_id} is running and one {kind} runs at a time: "
                               f"start this one when it has finished")
            now = datetime.now(UTC)
            job = Job(job_id, kind, params or {}, who, now, updated_at=now)
            self._live[job_id] = job
            thread = threading.Thread(target=self._run, args=(job, work), name=f"{kind}-{job_id}", daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        job.checked.wait(wait_s)
        with self._lock:
            if job.ended and job.failure is not None and not job.accepted:
                del self._live[job_id]  # answered as this request's error: nothing to record
                raise job.failure
            job.answered = True
            out = view(job.row(self.owner))
        if job.ended:
            self._write_final(job)
        return out

    def _run(self, job: Job, work: Work) -> None:
        def progress(done: int, total: int) -> None:
            if job.stop.is_set():
                raise JobStopped(f"the server stopped before {job.kind} {job.job_id} finished")
            job.done, job.total = done, total
            job.updated_at = datetime.now(UTC)
            first = not job.accepted
            job.status, job.accepted = "running", True
            if first or time.monotonic() - job.written_at >= self.progress_interval_s:
                self._write(job)  # first: before start() answers, so a 202 means it is recorded
            job.checked.set()

        try:
            work(progress)
            job.status = "done"
        except LakeError as exc:
            job.status, job.failure, job.error = "failed", exc, exc.to_json()["error"]
        except JobStopped as exc:
            job.status, job.error = "interrupted", {"type": "Interrupted", "message": str(exc)}
        except Exception:
            log.exception("%s %s failed", job.kind, job.job_id)
            job.status = "failed"
            job.error = {"type": "InternalError", "message": "internal error; the server log has the details"}
        finally:
            job.finished_at = job.updated_at = datetime.now(UTC)
            with self._lock:
                job.ended = True
                record = job.accepted or job.answered or job.status == "done"
            if record:
                self._write_final(job)
            job.checked.set()

    def _write(self, job: Job) -> None:
        """Record the job's row; a failed progress write is logged, never fatal to the job."""
        try:
            self.lake.upsert("jobs", [job.row(self.owner)])
            job.written_at = time.monotonic()
        except (LakeError, OSError) as exc:
            log.warning("%s %s: could not record progress: %s", job.kind, job.job_id, exc)

    def _write_final(self, job: Job) -> None:
        with self._lock:
            if job.final_written:
                return
            job.final_written = True
        try:
            self.lake.upsert("jobs", [job.row(self.owner)])
        except (LakeError, OSError):
            log.exception("%s %s: could not record that it %s", job.kind, job.job_id, job.status)
        with self._lock:  # the lake has it now: nothing left that only this process knows
            self._live.pop(job.job_id, None)
