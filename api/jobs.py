"""Background jobs: exports and re-runs started through the API, one thread each.

The lake keeps each job's durable record (the `exports` table, the `runs` table); a `Job` adds
what only this process knows: live progress, and the error of a job that failed before it
was recorded. Jobs live in memory and are forgotten at restart; their records stay.

One job of each kind runs at a time: both kinds write to the lake and keep a core busy, and
a queue would hide how long a start will take. A second start is refused (409), naming the
job that runs.

Starting waits (up to `Settings.job_start_wait_s`) for the job's first progress report,
which `run_export` and `run_rerun` send once their input checks passed: an unknown set or an
empty selection is answered as the request's error, not as a job that fails a moment later.
At shutdown, running jobs are told to stop at their next progress report, so their records
end as failed rather than running forever.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from episodelake.lake.errors import Conflict, LakeError

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
#: What a job runs: a function of its progress callback. Its return value is not kept: the
#: result is in the lake.
Work = Callable[[Progress], object]


class JobStopped(Exception):
    """Raised inside a job's progress report when the server shuts down."""


@dataclass
class Job:
    job_id: str
    kind: str
    started_at: datetime
    done: int = 0
    total: int | None = None
    status: str = "running"  # running | finished | failed
    #: {"type", "message"}, the API's error shape, when the job failed.
    error: dict | None = None
    finished_at: datetime | None = None
    failure: LakeError | None = field(default=None, repr=False)
    #: Set by the first progress report (the job's input checks passed), or when it ends.
    checked: threading.Event = field(default_factory=threading.Event, repr=False)
    stop: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def progress(self) -> dict:
        return {"done": self.done, "total": self.total}


class Jobs:
    """The jobs of one server process, by id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._threads: list[threading.Thread] = []

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def of_kind(self, kind: str) -> list[Job]:
        """This kind's jobs, newest first."""
        with self._lock:
            jobs = [j for j in self._jobs.values() if j.kind == kind]
        return sorted(jobs, key=lambda j: j.started_at, reverse=True)

    def start(self, kind: str, job_id: str, work: Work, wait_s: float) -> Job:
        """Run `work` in a thread; raises its error if it fails its checks within `wait_s`."""
        with self._lock:
            busy = next((j for j in self._jobs.values() if j.kind == kind and j.status == "running"), None)
            if busy is not None:
                raise Conflict(f"{kind} {busy.job_id} is running and one {kind} runs at a time: "
                               f"start this one when it has finished")
            job = Job(job_id, kind, datetime.now(UTC))
            self._jobs[job_id] = job
            thread = threading.Thread(target=self._run, args=(job, work), name=f"{kind}-{job_id}", daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        job.checked.wait(wait_s)
        if job.failure is not None and job.total is None:
            with self._lock:  # answered as this request's error: nothing left to follow
                del self._jobs[job_id]
            raise job.failure
        return job

    def _run(self, job: Job, work: Work) -> None:
        def progress(done: int, total: int) -> None:
            if job.stop.is_set():
                raise JobStopped(f"the server stopped before {job.kind} {job.job_id} finished")
            job.done, job.total = done, total
            job.checked.set()

        try:
            work(progress)
            job.status = "finished"
        except LakeError as exc:
            job.status, job.failure, job.error = "failed", exc, exc.to_json()["error"]
        except JobStopped as exc:
            job.status, job.error = "failed", {"type": "JobStopped", "message": str(exc)}
        except Exception:
            log.exception("%s %s failed", job.kind, job.job_id)
            job.status = "failed"
            job.error = {"type": "InternalError", "message": "internal error; the server log has the details"}
        finally:
            job.finished_at = datetime.now(UTC)
            job.checked.set()

    def stop(self, timeout_s: float) -> None:
        """Ask running jobs to stop at their next progress report; wait up to `timeout_s`."""
        with self._lock:
            for job in self._jobs.values():
                job.stop.set()
            threads = list(self._threads)
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
