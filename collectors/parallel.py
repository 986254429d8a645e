"""Many collectors writing into one lake at once: threads in this process, or Ray actors.

A worker is a device and a policy, described by picklable specs (:class:`SimSpec`,
:class:`AdbSpec`, :class:`RemoteSpec`; :class:`ModelSpec`, :class:`RandomSpec`,
:class:`OracleSpec`) and opened where the worker runs, with its own `Recorder` (so its own
spool and writer: the lake takes concurrent commits). Tasks are handed out one at a time to
whichever worker is free, so a slow device never holds back the queue.

- A worker whose device is gone for good (DeviceUnavailable) stops; its task goes back to
  the queue for the others. The run fails only when every worker has stopped.
- Ctrl-C asks every worker to stop: each aborts its current episode (steps kept) before its
  next step, and all writers flush before the interrupt propagates.

Ray is optional (``pip install 'ray[default]'``) and imported only for ``backend="ray"``.
Actors ask for `cpus_per_worker` CPUs (default 0: collectors mostly wait on devices and
model servers). On a cluster the lake path must be storage every node sees.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from episodelake.collectors.collect import (
    EpisodeSummary,
    ModelPolicy,
    Policy,
    RandomPolicy,
    collect_one,
)
from episodelake.collectors.devices.base import Device, DeviceUnavailable, Task
from episodelake.collectors.devices.remote import RemoteOptions
from episodelake.collectors.model_client import ModelClient, ModelOptions
from episodelake.collectors.recorder import Recorder
from episodelake.lake.errors import InvalidInput

log = logging.getLogger(__name__)


# --- specs: how to open a device and a policy in the worker's process -------------------------

@dataclass(frozen=True)
class SimSpec:
    seed: int = 0
    name: str = "sim-0"
    with_ui_tree: bool = True

    def open(self) -> Device:
        from episodelake.collectors.devices.sim import SimDevice

        return SimDevice(self.seed, name=self.name, with_ui_tree=self.with_ui_tree)


@dataclass(frozen=True)
class AdbSpec:
    serial: str | None = None
    dry_run: bool = False
    with_ui_tree: bool = False
    apps: dict[str, str] = field(default_factory=dict)

    def open(self) -> Device:
        from episodelake.collectors.devices import adb

        return adb.connect(self.serial, dry_run=self.dry_run, with_ui_tree=self.with_ui_tree,
                           apps=self.apps)


@dataclass(frozen=True)
class RemoteSpec:
    urls: tuple[str, ...]
    options: RemoteOptions = RemoteOptions()

    def open(self) -> Device:
        from episodelake.collectors.devices.remote import RemoteDevice

        return RemoteDevice(self.urls, options=self.options)


@dataclass(frozen=True)
class ModelSpec:
    url: str
    model: str
    api_key: str | None = None
    style: str = "mai-ui"
    history_length: int = 3
    options: ModelOptions = ModelOptions()

    def open(self, device: Device) -> Policy:
        client = ModelClient(self.url, self.model, api_key=self.api_key, options=self.options)
        return ModelPolicy(client, style=self.style, history_length=self.history_length)


@dataclass(frozen=True)
class RandomSpec:
    seed: int = 0
    terminate_p: float = 0.05

    def open(self, device: Device) -> Policy:
        return RandomPolicy(self.seed, self.terminate_p)


@dataclass(frozen=True)
class OracleSpec:
    """The simulated phone's oracle; only for a SimSpec device."""

    def open(self, device: Device) -> Policy:
        from episodelake.collectors.devices.sim import OraclePolicy, SimDevice

        if not isinstance(device, SimDevice):
            raise InvalidInput("the oracle policy plays only on the simulated phone (--sim)")
        return OraclePolicy(device)


class DeviceSpec(Protocol):
    def open(self) -> Device: ...


class PolicySpec(Protocol):
    def open(self, device: Device) -> Policy: ...


def split_servers(urls: Sequence[str], workers: int,
                  options: RemoteOptions | None = None) -> list[RemoteSpec]:
    """One RemoteSpec per worker: worker i uses server i and, as its spares, every
    `workers`-th server after it (the reference's active servers then spare pool)."""
    if len(urls) < workers:
        raise InvalidInput(f"{workers} workers need at least {workers} server entries, got "
                           f"{len(urls)}; a server with several devices can be listed once per "
                           "device as URL#DEVICE")
    return [RemoteSpec(tuple(urls[i::workers]), options or RemoteOptions()) for i in range(workers)]


# --- one worker -------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSettings:
    run_id: str
    max_steps: int = 20
    tags: tuple[str, ...] = ()


class Collector:
    """A device, a policy and a recorder in one process: runs one task at a time."""

    def __init__(self, lake: str, device: DeviceSpec, policy: PolicySpec, settings: RunSettings):
        self.device = device.open()
        self.policy = policy.open(self.device)
        self.recorder = Recorder(lake, run_id=settings.run_id, env=self.device.env,
                                 device=self.device.name, model_name=self.policy.name)
        self.settings = settings
        self.stop = threading.Event()

    def run(self, task: Task) -> EpisodeSummary:
        return collect_one(self.device, self.policy, self.recorder, task,
                           max_steps=self.settings.max_steps, tags=self.settings.tags,
                           stop=self.stop)

    def request_stop(self) -> None:
        self.stop.set()

    def close(self) -> int:
        """Flush and close; returns the number of commits this worker's writer made."""
        try:
            self.recorder.close()
        finally:
            self.device.close()
        return self.recorder.writer.commits


class _Worker(Protocol):
    def submit(self, task: Task) -> Future[EpisodeSummary]: ...
    def request_stop(self) -> None: ...
    def close(self) -> int: ...


class _ThreadWorker:
    """A Collector living on its own thread."""

    def __init__(self, lake: str, device: DeviceSpec, policy: PolicySpec, settings: RunSettings):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="collector")
        self._collector = self._pool.submit(Collector, lake, device, policy, settings)

    def submit(self, task: Task) -> Future[EpisodeSummary]:
        return self._pool.submit(lambda: self._collector.result().run(task))

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


class _RayWorker:
    """A Collector as a Ray actor (two concurrent calls, so a stop reaches a running task)."""

    def __init__(self, actor_class: Any, lake: str, device: DeviceSpec, policy: PolicySpec,
                 settings: RunSettings):
        self._actor = actor_class.remote(lake, device, policy, settings)

    def submit(self, task: Task) -> Future[EpisodeSummary]:
        return self._actor.run.remote(task).future()

    def request_stop(self) -> None:
        self._actor.request_stop.remote()

    def close(self) -> int:
        import ray

        try:
            return ray.get(self._actor.close.remote())
        finally:
            ray.kill(self._actor)


# --- the dispatcher ---------------------------------------------------------------------------

@dataclass
class ParallelReport:
    episodes: list[EpisodeSummary] = field(default_factory=list)
    commits: int = 0
    stopped_workers: list[str] = field(default_factory=list)


def collect_parallel(lake: Path | str, workers: Sequence[tuple[DeviceSpec, PolicySpec]],
                     tasks: Sequence[Task], settings: RunSettings, *, backend: str = "threads",
                     ray_address: str | None = None, cpus_per_worker: float = 0.0) -> ParallelReport:
    """Run `tasks` on `workers` (device spec, policy spec) pairs into the lake at `lake`."""
    if not workers:
        raise InvalidInput("parallel collection needs at least one worker")
    make = _worker_factory(backend, ray_address, cpus_per_worker)
    handles = [make(str(lake), device, policy, settings) for device, policy in workers]
    queue = deque(tasks)
    report = ParallelReport()
    running: dict[Future[EpisodeSummary], tuple[int, Task]] = {}
    idle = list(range(len(handles)))
    try:
        while queue or running:
            while queue and idle:
                index = idle.pop(0)
                task = queue.popleft()
                running[handles[index].submit(task)] = (index, task)
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                index, task = running.pop(future)
                try:
                    report.episodes.append(future.result())
                    idle.append(index)
                except DeviceUnavailable as exc:
                    log.error("worker %d stopped: %s", index, exc)
                    report.stopped_workers.append(f"worker {index}: {exc}")
                    queue.appendleft(task)
        if queue:
            raise DeviceUnavailable(f"every worker stopped with {len(queue)} task(s) left: "
                                    + "; ".join(report.stopped_workers))
    except KeyboardInterrupt:
        log.warning("interrupted: stopping %d worker(s); running episodes are recorded as aborted",
                    len(handles))
        for handle in handles:
            handle.request_stop()
        for future in running:
            try:
                report.episodes.append(future.result())
            except Exception as exc:  # the worker is gone; its spool is replayed on next open
                log.error("a worker failed while stopping: %s", exc)
        raise
    finally:
        for handle in handles:
            report.commits += handle.close()
    return report


def _worker_factory(backend: str, ray_address: str | None,
                    cpus_per_worker: float) -> Callable[..., _Worker]:
    if backend == "threads":
        return _ThreadWorker
    if backend != "ray":
        raise InvalidInput(f"backend must be 'threads' or 'ray', not {backend!r}")
    try:
        import ray
    except ImportError:
        raise InvalidInput("--ray needs Ray: pip install 'ray[default]'") from None
    if not ray.is_initialized():
        ray.init(address=ray_address, include_dashboard=False, configure_logging=False)
    actor_class = ray.remote(num_cpus=cpus_per_worker, max_concurrency=2)(Collector)

    def make(lake: str, device: DeviceSpec, policy: PolicySpec, settings: RunSettings) -> _Worker:
        return _RayWorker(actor_class, lake, device, policy, settings)

    return make
