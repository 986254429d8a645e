"""Many episodes at once: `run_batch` runs the episode loop on several workers into one lake.

Every job that produces episodes goes through here (rollouts on the simulated phone, the
trainer's rollouts, `elake collect`, re-runs), so they share one way of opening devices and
agents, of splitting work, and of stopping. A worker is a device, an agent and a `Recorder`
(its own spool and writer: the lake takes concurrent commits), described by picklable specs
(a device's spec, from its kind in :mod:`episodelake.collectors.envs.devices`; :class:`ModelSpec`,
:class:`RandomSpec`, :class:`OracleSpec`, :class:`InProcessAgent`) and opened where the worker
runs. The runner names no device: the built-in devices' specs (``SimSpec``, ``AdbSpec``,
``RemoteSpec``) live in their device modules and are importable from here as before. Work is handed out to whichever worker is free, so a slow device never holds back the
queue. Backends:

- ``"process"``: one spawned process per worker (Lance is not fork-safe), for CPU-bound work
  such as the simulated phone and its judge; one worker runs in this process instead.
- ``"thread"``: threads in this process, for device-bound work (phones, servers, models
  behind HTTP) that mostly waits.
- ``"ray"``: Ray actors, optional (``pip install 'ray[default]'``), imported only when asked
  for. Actors ask for `cpus_per_worker` CPUs (default 0: collectors mostly wait on devices
  and model servers). On a cluster the lake must be storage every node sees (an object
  store); its location goes to each actor with its storage options, so explicit credentials
  given to `Lake(..., storage_options=...)` reach the workers through Ray's object store
  (never through their logs or reprs), and workers need no AWS_* variables of their own.

Anchor keys (GiGPO's step groups) are clustered per group by the recorder's keyer, so a
group's steps must meet one keyer: threads share one keyer and take tasks one at a time;
processes and Ray actors take a whole group at a time.

Each task carries its own seed where it needs one (:class:`~episodelake.collectors.envs.base.Task`), so a batch
gives the same episodes whichever worker runs which task.

- A worker whose device is gone for good (DeviceUnavailable) stops; its unfinished tasks go
  back to the queue for the others. The batch fails only when every worker has stopped.
- A worker that dies (its process or Ray actor is killed, its node is lost) stops too, but
  its unit is not run again: which of its episodes reached the lake is not known here (those
  committed are there; its acknowledged, uncommitted steps wait in its spool on that node for
  the next writer there or `elake recover`), and running them again would record a group
  twice. The report names the worker and the tasks it had.
- Ctrl-C asks every worker to stop: each aborts its current episode (steps kept) before its
  next step, and all writers flush before the interrupt propagates.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import pickle
import signal
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    BrokenExecutor,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from episodelake.collectors.agents.model import ModelPolicy
from episodelake.collectors.agents.model_client import ModelClient, ModelOptions
from episodelake.collectors.agents.random import RandomPolicy
from episodelake.collectors.envs.adb import AdbSpec as AdbSpec
from episodelake.collectors.envs.base import Device, DeviceSpec, StepJudge, Task
from episodelake.collectors.envs.remote import RemoteSpec as RemoteSpec
from episodelake.collectors.envs.remote import split_servers as split_servers
from episodelake.collectors.envs.sim.device import SimSpec as SimSpec
from episodelake.collectors.jobs.bulk import connect_ray
from episodelake.collectors.loop import (
    Agent,
    EpisodeSummary,
    collect_one,
)
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.derive.anchor import AnchorKeyer
from episodelake.lake.storage.errors import DeviceUnavailable, InvalidInput
from episodelake.lake.storage.store import Location, location

if TYPE_CHECKING:
    from episodelake.collectors.agents.oracle import NoiseConfig

log = logging.getLogger(__name__)

BACKENDS = ("process", "thread", "ray")


# --- specs: how to open a device and an agent where the worker runs ---------------------------

@dataclass(frozen=True)
class ModelSpec:
    url: str
    model: str
    api_key: str | None = None
    style: str = "mai-ui"
    history_length: int = 3
    options: ModelOptions = ModelOptions()

    def open(self, device: Device) -> Agent:
        client = ModelClient(self.url, self.model, api_key=self.api_key, options=self.options)
        return ModelPolicy(client, style=self.style, history_length=self.history_length)


@dataclass(frozen=True)
class RandomSpec:
    seed: int = 0
    terminate_p: float = 0.05

    def open(self, device: Device) -> Agent:
        return RandomPolicy(self.seed, self.terminate_p)


@dataclass(frozen=True)
class OracleSpec:
    """The simulated phone's demo policy (its oracle, plus the mistakes of `noise`); it
    reads the phone through the device, so only a SimSpec device will do."""

    noise: NoiseConfig | None = None  # None: the oracle itself, no mistakes
    seed: int = 0

    def open(self, device: Device) -> Agent:
        from episodelake.collectors.agents.oracle import OraclePolicy

        # any other device is refused by OraclePolicy itself, with the flag to use instead
        return OraclePolicy(device, self.noise, self.seed)  # type: ignore[arg-type]  # it refuses a non-sim device


class InProcessAgent:
    """An agent object already built in this process (a model on this GPU), for a batch
    that runs here: one worker of any backend but Ray, or threads when the agent is
    thread-safe. It does not travel to other processes."""

    def __init__(self, agent: Agent):
        self.agent = agent

    def open(self, device: Device) -> Agent:
        return self.agent

    def __getstate__(self) -> dict[str, Any]:
        raise InvalidInput(f"agent {self.agent.name!r} lives in this process: run it with one "
                           "worker, or with the thread backend")


class AgentSpec(Protocol):
    def open(self, device: Device) -> Agent: ...


# --- one worker -------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSettings:
    """What every episode of a batch shares."""

    run_id: str
    max_steps: int = 20
    tags: tuple[str, ...] = ()
    policy_version: str | None = None
    #: The recorder's image checks: "structure" skips decoding screenshots that the sim has
    #: just rendered (a fifth of a sim step's time); their perceptual hash is then not
    #: stored, and anchor keys come from UI trees.
    image_checks: str = "decode"
    #: Builds each worker's step judge (a picklable zero-argument callable, e.g. the
    #: `SimJudge` class); None records no step rewards.
    judge: Callable[[], StepJudge] | None = None


@dataclass
class UnitResult:
    """What a worker did with one unit of work: the episodes it ran and, when its device
    was lost for good, the tasks it did not get to and why."""

    episodes: list[EpisodeSummary] = field(default_factory=list)
    unfinished: list[Task] = field(default_factory=list)
    stopped: str | None = None


class Collector:
    """A device, an agent, an optional judge and a recorder: runs one unit at a time."""

    def __init__(self, lake: Location, device: DeviceSpec, agent: AgentSpec, settings: RunSettings,
                 *, stop: Any = None, anchor: AnchorKeyer | None = None):
        self.device = device.open()
        try:
            self.agent = agent.open(self.device)
            self.judge = settings.judge() if settings.judge is not None else None
            self.recorder = Recorder(Lake(lake), run_id=settings.run_id,
                                     policy_version=settings.policy_version, env=self.device.env,
                                     device=self.device.name, model_name=self.agent.name,
                                     image_checks=settings.image_checks,
                                     anchor=anchor if anchor is not None else "default")
        except BaseException:
            self.device.close()
            raise
        self.settings = settings
        self.stop = stop if stop is not None else threading.Event()

    def run(self, unit: Sequence[Task]) -> UnitResult:
        out = UnitResult()
        for index, task in enumerate(unit):
            if self.stop.is_set():
                out.unfinished = list(unit[index:])
                break
            try:
                out.episodes.append(collect_one(
                    self.device, self.agent, self.recorder, task, max_steps=self.settings.max_steps,
                    tags=self.settings.tags, judge=self.judge, stop=self.stop))
            except DeviceUnavailable as exc:
                out.unfinished, out.stopped = list(unit[index:]), str(exc)
                break
        return out

    def request_stop(self) -> None:
        self.stop.set()

    def close(self) -> int:
        """Flush and close; returns the number of commits this worker's writer made."""
        try:
            self.recorder.close()
        finally:
            self.device.close()
        return self.recorder.writer.commits


class WorkerLost(Exception):
    """A worker's process or actor died under a unit of work."""


def _losing(future: Future[UnitResult], lost: tuple[type[BaseException], ...]) -> Future[UnitResult]:
    """`future`, with the backend's own "the worker died" errors turned into WorkerLost."""
    out: Future[UnitResult] = Future()

    def done(inner: Future[UnitResult]) -> None:
        exc = None if inner.cancelled() else inner.exception()
        if inner.cancelled():
            out.cancel()
        elif exc is None:
            out.set_result(inner.result())
        elif isinstance(exc, lost):
            out.set_exception(WorkerLost(_first_line(exc)))
        else:
            out.set_exception(exc)

    future.add_done_callback(done)
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class _Worker(Protocol):
    def submit(self, unit: list[Task]) -> Future[UnitResult]: ...
    def request_stop(self) -> None: ...
    def close(self) -> int: ...


class _InlineWorker:
    """A Collector in the calling thread: a single-worker batch pays for no process or
    thread, and a Ctrl-C lands in the episode itself."""

    def __init__(self, lake: Location, device: DeviceSpec, agent: AgentSpec, settings: RunSettings):
        self._args = (lake, device, agent, settings)
        self._collector: Collector | None = None
        self._error: BaseException | None = None

    def submit(self, unit: list[Task]) -> Future[UnitResult]:
        future: Future[UnitResult] = Future()
        try:
            if self._collector is None and self._error is None:
                try:
                    self._collector = Collector(*self._args)
                except Exception as exc:
                    self._error = exc
            if self._error is not None:
                raise self._error
            future.set_result(self._collector.run(unit))  # type: ignore[union-attr]  # built above, or _error raised
        except Exception as exc:
            future.set_exception(exc)
        return future

    def request_stop(self) -> None:
        if self._collector is not None:
            self._collector.request_stop()

    def close(self) -> int:
        return self._collector.close() if self._collector is not None else 0


class _ThreadWorker:
    """A Collector living on its own thread."""

    def __init__(self, lake: Location, device: DeviceSpec, agent: AgentSpec, settings: RunSettings,
                 anchor: AnchorKeyer):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="collector")
        self._collector = self._pool.submit(Collector, lake, device, agent, settings,
                                            anchor=anchor)

    def submit(self, unit: list[Task]) -> Future[UnitResult]:
        return self._pool.submit(lambda: self._collector.result().run(unit))

    def request_stop(self) -> None:
        if self._collector.done() and self._collector.exception() is None:
            self._collector.result().request_stop()

    def close(self) -> int:
        try:
            if self._collector.exception() is not None:
                return 0
            return self._pool.submit(self._collector.result().close).result()
        finally:
            self._pool.shutdown()


# The process backend: each worker process holds one Collector in these globals, set up by
# its first call; the stop event is shared with the parent from the process's start.
_PROCESS_STOP: Any = None
_PROCESS_COLLECTOR: Collector | None = None
_PROCESS_OPEN_ERROR: BaseException | None = None


def _process_init(stop: Any) -> None:
    global _PROCESS_STOP
    _PROCESS_STOP = stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us through `stop`


def _process_open(lake: Location, specs: bytes) -> None:
    global _PROCESS_COLLECTOR, _PROCESS_OPEN_ERROR
    try:
        device, agent, settings = pickle.loads(specs)
        _PROCESS_COLLECTOR = Collector(lake, device, agent, settings, stop=_PROCESS_STOP)
    except Exception as exc:
        _PROCESS_OPEN_ERROR = exc
        raise


def _process_run(unit: list[Task]) -> UnitResult:
    if _PROCESS_COLLECTOR is None:
        raise _PROCESS_OPEN_ERROR or RuntimeError("the worker process has no collector")
    return _PROCESS_COLLECTOR.run(unit)


def _process_close() -> int:
    return _PROCESS_COLLECTOR.close() if _PROCESS_COLLECTOR is not None else 0


class _ProcessWorker:
    """A Collector in a spawned process of its own (opened by the first call, so opening
    several workers overlaps instead of queueing in the dispatcher)."""

    def __init__(self, lake: Location, device: DeviceSpec, agent: AgentSpec, settings: RunSettings):
        # pickled here, so a spec that cannot travel fails now with its own message
        specs = pickle.dumps((device, agent, settings), protocol=pickle.HIGHEST_PROTOCOL)
        context = mp.get_context("spawn")  # Lance is not fork-safe
        self._stop = context.Event()
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context,
                                         initializer=_process_init, initargs=(self._stop,))
        self._pool.submit(_process_open, lake, specs)

    def submit(self, unit: list[Task]) -> Future[UnitResult]:
        return _losing(self._pool.submit(_process_run, unit), (BrokenExecutor,))

    def request_stop(self) -> None:
        self._stop.set()

    def close(self) -> int:
        try:
            return self._pool.submit(_process_close).result()
        except BrokenExecutor:  # already reported by the unit it was running
            return 0
        finally:
            self._pool.shutdown()


class _RayWorker:
    """A Collector as a Ray actor (two concurrent calls, so a stop reaches a running unit).
    Its recorder writes to the lake from the actor's node, with its spool on that node."""

    def __init__(self, actor_class: Any, lake: Location, device: DeviceSpec, agent: AgentSpec,
                 settings: RunSettings):
        self._actor = actor_class.remote(lake, device, agent, settings)

    def submit(self, unit: list[Task]) -> Future[UnitResult]:
        from ray.exceptions import RayActorError

        return _losing(self._actor.run.remote(unit).future(), (RayActorError,))

    def request_stop(self) -> None:
        self._actor.request_stop.remote()

    def close(self) -> int:
        import ray
        from ray.exceptions import RayActorError

        try:
            return ray.get(self._actor.close.remote())
        except RayActorError:  # already reported by the unit it was running
            return 0
        finally:
            ray.kill(self._actor)


# --- the dispatcher ---------------------------------------------------------------------------

@dataclass
class BatchReport:
    episodes: list[EpisodeSummary] = field(default_factory=list)
    commits: int = 0
    stopped_workers: list[str] = field(default_factory=list)
    #: Tasks whose worker died under them: not run again (see the module's notes).
    lost_tasks: list[Task] = field(default_factory=list)


def run_batch(lake: Lake | Location | Path | str, workers: Sequence[tuple[DeviceSpec, AgentSpec]],
              tasks: Sequence[Task], settings: RunSettings, *, backend: str = "thread",
              ray_address: str | None = None, cpus_per_worker: float = 0.0,
              on_episode: Callable[[EpisodeSummary], object] | None = None) -> BatchReport:
    """Run `tasks` on `workers` (device spec, agent spec) pairs into `lake`; everything is
    flushed when this returns. `on_episode` is called in this thread for each episode as
    its result comes back (a progress bar, a re-run's progress)."""
    if backend not in BACKENDS:
        raise InvalidInput(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if not workers:
        raise InvalidInput("a batch needs at least one worker")
    # the location, storage options included, is what every worker opens (pickled to Ray
    # actors and worker processes: explicit credentials travel with it, never in its repr)
    where = lake.location if isinstance(lake, Lake) else location(lake)
    Lake(where)  # create the tables once, before workers race to
    make = _worker_factory(backend, len(workers), ray_address, cpus_per_worker)
    queue = deque(work_units(tasks, by_group=backend != "thread"))
    report = BatchReport()
    handles: list[_Worker] = []
    running: dict[Future[UnitResult], tuple[int, list[Task]]] = {}
    try:
        handles += [make(where, device, agent, settings) for device, agent in workers]
        idle = list(range(len(handles)))
        while queue or running:
            while queue and idle:
                index = idle.pop(0)
                unit = queue.popleft()
                running[handles[index].submit(unit)] = (index, unit)
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                index, unit = running.pop(future)
                try:
                    result = future.result()
                except DeviceUnavailable as exc:  # the device could not even be opened
                    result = UnitResult(unfinished=unit, stopped=str(exc))
                except WorkerLost as exc:
                    names = ", ".join(task.name for task in unit)
                    log.error("worker %d lost: %s", index, exc)
                    report.stopped_workers.append(
                        f"worker {index}: lost ({exc}); its {len(unit)} task(s) ({names}) are not "
                        "run again: what it committed is in the lake, its uncommitted steps in "
                        "its spool on its node (`elake recover` there replays them)")
                    report.lost_tasks += unit
                    continue
                _take(report, result, on_episode)
                if result.stopped is not None:
                    log.error("worker %d stopped: %s", index, result.stopped)
                    report.stopped_workers.append(f"worker {index}: {result.stopped}")
                    queue.appendleft(result.unfinished)
                else:
                    idle.append(index)
        if queue:
            left = sum(len(unit) for unit in queue)
            raise DeviceUnavailable(f"every worker stopped with {left} task(s) left: "
                                    + "; ".join(report.stopped_workers))
    except KeyboardInterrupt:
        log.warning("interrupted: stopping %d worker(s); running episodes are recorded as aborted",
                    len(handles))
        for handle in handles:
            handle.request_stop()
        for future in running:
            try:
                _take(report, future.result(), on_episode)
            except Exception as exc:  # the worker is gone; its spool is replayed on next open
                log.error("a worker failed while stopping: %s", exc)
        raise
    finally:
        for handle in handles:
            try:
                report.commits += handle.close()
            except Exception as exc:  # keep closing the others: each flushes its own writer
                log.error("a worker failed to close: %s", exc)
    if isinstance(lake, Lake):
        lake.invalidate()
    return report


def _take(report: BatchReport, result: UnitResult,
          on_episode: Callable[[EpisodeSummary], object] | None) -> None:
    report.episodes += result.episodes
    if on_episode is not None:
        for episode in result.episodes:
            on_episode(episode)


def work_units(tasks: Sequence[Task], *, by_group: bool) -> list[list[Task]]:
    """The batch as units of work, in order: one task each, or (`by_group`) every task of a
    group together, placed where the group first appears."""
    if not by_group:
        return [[task] for task in tasks]
    units: list[list[Task]] = []
    groups: dict[str, list[Task]] = {}
    for task in tasks:
        if task.group_id is None:
            units.append([task])
        elif task.group_id in groups:
            groups[task.group_id].append(task)
        else:
            groups[task.group_id] = [task]
            units.append(groups[task.group_id])
    return units


def _worker_factory(backend: str, workers: int, ray_address: str | None,
                    cpus_per_worker: float) -> Callable[..., _Worker]:
    if backend == "process":
        return _InlineWorker if workers == 1 else _ProcessWorker
    if backend == "thread":
        anchor = AnchorKeyer()  # one keyer for every thread: groups may span workers

        def thread_worker(lake: Location, device: DeviceSpec, agent: AgentSpec,
                          settings: RunSettings) -> _Worker:
            return _ThreadWorker(lake, device, agent, settings, anchor)

        return thread_worker
    ray = connect_ray(ray_address)
    actor_class = ray.remote(num_cpus=cpus_per_worker, max_concurrency=2)(Collector)

    def ray_worker(lake: Location, device: DeviceSpec, agent: AgentSpec,
                   settings: RunSettings) -> _Worker:
        return _RayWorker(actor_class, lake, device, agent, settings)

    return ray_worker
