"""The server's background jobs: one thread each, on top of the lake's job records
(`episodelake.lake.ops.jobs`, which records every job, from the CLI too).

What only the server adds: threads; live progress (between the throttled writes, this server
answers with what it holds in memory, `Settings.job_progress_interval_s`); one job of each
kind at a time (a second start is refused, 409, naming the one that runs); waiting for a job
to be accepted before answering (up to `Settings.job_start_wait_s`), so an unknown set or an
empty selection is answered as the request's error and leaves no job behind; and at shutdown,
asking running jobs to stop at their next progress report (they end `interrupted`).

Each server holds its own `Owner` lock for its lifetime; at start-up it records `interrupted`
for every queued or running job whose process is gone (a server or command killed hard), and
leaves alone the jobs of processes still alive on the same lake.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from episodelake.lake.ops import jobs as lake_jobs
from episodelake.lake.ops.jobs import ACTIVE, Job, Owner
from episodelake.lake.storage.errors import Conflict, EpisodeLakeError
from episodelake.lake.storage.lake import Lake

log = logging.getLogger(__name__)

__all__ = ["ACTIVE", "Jobs", "OnInterrupted", "Work"]

#: What a job runs: a function of its `Job` (report progress with `job.progress`). Its
#: return value is not kept: the result is in the lake.
Work = Callable[[Job], object]
#: Called at start-up for each job of a kind found interrupted (to fix that kind's record).
OnInterrupted = Callable[[Lake, dict], None]


class Jobs:
    """The jobs of one lake as seen by one server: recorded ones and the ones it runs."""

    def __init__(self, lake: Lake, *, progress_interval_s: float = lake_jobs.PROGRESS_INTERVAL_S):
        self.lake = lake
        self.progress_interval_s = progress_interval_s
        self.owner: Owner | None = None
        self._lock = threading.Lock()
        self._live: dict[str, Job] = {}
        self._threads: list[threading.Thread] = []

    # -- start-up and shutdown -----------------------------------------------------------
    def open(self, on_interrupted: dict[str, OnInterrupted] | None = None) -> list[dict]:
        """Hold this server's owner lock; record the jobs of dead processes `interrupted`.

        Returns the jobs marked; `on_interrupted[kind]` is called for each."""
        self.owner = Owner(self.lake.path)
        orphans = lake_jobs.reap(self.lake)
        for job in orphans:
            hook = (on_interrupted or {}).get(job["kind"])
            if hook is not None:
                try:
                    hook(self.lake, job)
                except EpisodeLakeError as exc:
                    log.warning("%s %s: could not mark its record interrupted: %s", job["kind"], job["job_id"], exc)
        return orphans

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
        if self.owner is not None:
            self.owner.close()
            self.owner = None

    # -- reading -------------------------------------------------------------------------
    def _live_views(self, kind: str | None = None) -> dict[str, dict]:
        with self._lock:
            live = [j for j in self._live.values() if kind is None or j.kind == kind]
        return {job.job_id: job.view() for job in live}

    def get(self, job_id: str) -> dict | None:
        """One job: live from this server when it runs it, else as recorded."""
        with self._lock:
            job = self._live.get(job_id)
        return job.view() if job is not None else lake_jobs.get_job(self.lake, job_id)

    def of_kind(self, kind: str) -> dict[str, dict]:
        """This kind's jobs by id, recorded and live (live wins), newest first."""
        out = {j["job_id"]: j for j in lake_jobs.list_jobs(self.lake, kind=kind, limit=None)}
        out.update(self._live_views(kind))
        return dict(sorted(out.items(), key=lambda kv: kv[1]["created_at"], reverse=True))

    def list(self, kind: str | None = None, status: str | None = None, limit: int = 200) -> list[dict]:
        """Recorded jobs, newest first, with this server's live progress."""
        live = self._live_views(kind)
        return [live.get(j["job_id"], j) for j in lake_jobs.list_jobs(self.lake, kind=kind, status=status,
                                                                       limit=limit)]

    # -- running -------------------------------------------------------------------------
    def start(self, kind: str, job_id: str, work: Work, *, wait_s: float, params: dict | None = None,
              who: str | None = None) -> dict:
        """Run `work` in a thread; raises its error if it fails its checks within `wait_s`."""
        with self._lock:
            busy = next((j for j in self._live.values() if j.kind == kind and not j.ended), None)
            if busy is not None:
                raise Conflict(f"{kind} {busy.job_id} is running and one {kind} runs at a time: "
                               f"start this one when it has finished")
            job = Job(self.lake, kind, job_id=job_id, params=params, who=who, owner=self.owner,
                      progress_interval_s=self.progress_interval_s)
            self._live[job_id] = job
            thread = threading.Thread(target=self._run, args=(job, work), name=f"{kind}-{job_id}", daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        job.settled.wait(wait_s)
        if job.ended and job.failure is not None and not job.accepted:
            self._forget(job)  # answered as this request's error: nothing to record
            raise job.failure
        out = job.view()
        job.keep_record()  # the caller has its id now: its end is recorded whatever it is
        self._forget_if_recorded(job)
        return out

    def _run(self, job: Job, work: Work) -> None:
        try:
            with job.recording():
                work(job)
        except Exception:  # recorded by the job (and logged there, when unexpected)
            pass
        finally:
            self._forget_if_recorded(job)

    def _forget(self, job: Job) -> None:
        with self._lock:
            self._live.pop(job.job_id, None)

    def _forget_if_recorded(self, job: Job) -> None:
        """Once its final row is written, the lake has all this server knew of it."""
        if job.final_written:
            self._forget(job)
