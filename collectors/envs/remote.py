"""A phone behind an environment server (ClawGUI-Server / MobileWorld HTTP API) as a `Device`.

The API (FORMATS.md section 5; served for the simulated phone by
:mod:`episodelake.collectors.envs.server`): ``/health``, ``/init``, ``/screenshot``, ``/step``,
``/task/goal``, ``/task/init``, ``/task/eval`` (a GET with a JSON body), ``/task/tear_down``.

Servers come as a list (a server file holds one URL a line; ``URL#DEVICE`` picks one device of
a server that serves several, else its first ready device is used). The first healthy one is used;
a server that fails when a task starts (health, init) or that is lost mid-episode moves to
the back of the list, so the next episode goes to the next server, as the reference's spare
pool does. A lost server ends the current episode (:class:`EnvironmentLost`); it is never
retried into a half-known state.

Timeouts and retries follow the reference: health 10 s and task init 120 s, each retried once
after a pause before the server is given up; a step is retried on timeout only, with growing
timeouts (30, 60, 90 s); evaluation 30 s, retried once.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import httpx

from episodelake.collectors.envs.base import (
    ActionResult,
    Collection,
    Device,
    DeviceKind,
    DeviceOption,
    Evaluation,
    Exclusive,
    RerunDevice,
    RerunTarget,
    Screen,
    Task,
)
from episodelake.collectors.envs.jsonaction import to_json_action
from episodelake.lake.storage.errors import (
    ActionFailed,
    DeviceError,
    DeviceUnavailable,
    EnvironmentLost,
    InvalidInput,
)
from episodelake.lake.vocab.families import ParsedAction

log = logging.getLogger(__name__)

_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"RIFF")


@dataclass(frozen=True)
class RemoteOptions:
    health_timeout_s: float = 10.0
    init_timeout_s: float = 120.0
    screenshot_timeout_s: float = 30.0
    step_timeouts_s: tuple[float, ...] = (30.0, 60.0, 90.0)
    eval_timeout_s: float = 30.0
    tear_down_timeout_s: float = 30.0
    #: Pause before the single retry of health, init, screenshot and evaluation calls.
    retry_wait_s: float = 5.0
    #: Sent as ``Authorization: Bearer`` (our server requires one off loopback).
    token: str | None = None

    def __post_init__(self) -> None:
        if not self.step_timeouts_s:
            raise InvalidInput("step_timeouts_s needs at least one timeout")


def read_server_file(path: Path | str) -> list[str]:
    """Server URLs from a file: one a line; blank lines and lines starting with # skipped."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise DeviceUnavailable(f"cannot read server file {path}: {exc}") from None
    urls = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not urls:
        raise DeviceUnavailable(f"server file {path} lists no URL (one http://host:port a line)")
    return urls


class _CallFailed(Exception):
    """One HTTP call did not give a usable answer. `refused`: the server answered 4xx (our
    request was wrong, another server would say the same); `timeout`: no answer in time."""

    def __init__(self, message: str, *, refused: bool = False, timeout: bool = False):
        super().__init__(message)
        self.refused = refused
        self.timeout = timeout


class ServerPool:
    """Server entries (``URL`` or ``URL#DEVICE``) in order of preference: the first is in use,
    the rest are spares."""

    def __init__(self, urls: Sequence[str]):
        cleaned = [u.strip().rstrip("/") for u in urls]
        bad = [u for u in cleaned if not u.startswith(("http://", "https://"))]
        if not cleaned or bad:
            raise DeviceUnavailable(f"server URLs must start with http:// or https:// (got "
                                    f"{bad or 'none'}), e.g. http://127.0.0.1:6800")
        self._urls = deque(cleaned)

    @property
    def current(self) -> str:
        return self._urls[0]

    def __len__(self) -> int:
        return len(self._urls)

    def demote(self, url: str, reason: str) -> None:
        """Move a failing server to the back; the next one becomes current."""
        if url in self._urls:
            self._urls.remove(url)
            self._urls.append(url)
            log.warning("environment server %s set aside (%s); next: %s", url, reason, self.current)


class RemoteDevice(Device):
    env = "mobileworld"

    def __init__(self, urls: Sequence[str], *, options: RemoteOptions | None = None):
        self.pool = ServerPool(urls)
        self.options = options or RemoteOptions()
        headers = {"Authorization": f"Bearer {self.options.token}"} if self.options.token else {}
        self._http = httpx.Client(headers=headers)
        self._entry: str | None = None  # the pool entry in use while a task runs
        self._url: str | None = None
        self._device: str | None = None
        self._screen: Screen | None = None
        self._shots = 0

    @property
    def name(self) -> str:
        if self._url is None:
            return self.pool.current
        return f"{self._url}#{self._device}"

    # --- HTTP --------------------------------------------------------------------------------

    def _call(self, method: str, path: str, *, timeout: float, url: str | None = None,
              **kwargs: Any) -> Any:
        base = url or self._session_url()
        try:
            response = self._http.request(method, base + path, timeout=timeout, **kwargs)
        except httpx.TimeoutException:
            raise _CallFailed(f"{method} {base}{path}: no answer within {timeout:g}s",
                              timeout=True) from None
        except httpx.TransportError as exc:
            raise _CallFailed(f"{method} {base}{path}: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            raise _CallFailed(f"{method} {base}{path}: HTTP {response.status_code}: "
                              f"{_detail(response)}", refused=response.status_code < 500)
        try:
            return response.json()
        except ValueError:
            raise _CallFailed(f"{method} {base}{path}: the answer is not JSON: "
                              f"{response.text[:200]!r}") from None

    def _retrying(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()` once more after a pause when it fails for a reason a retry may fix."""
        try:
            return call()
        except _CallFailed as exc:
            if exc.refused:
                raise
            log.warning("%s failed (%s); retrying in %.1fs", what, exc, self.options.retry_wait_s)
            time.sleep(self.options.retry_wait_s)
            return call()

    def _session_url(self) -> str:
        if self._url is None:
            raise DeviceError("no task is running on an environment server: call start_task first")
        return self._url

    # --- task lifecycle ----------------------------------------------------------------------

    def start_task(self, task: Task) -> str:
        problems: list[str] = []
        for _ in range(len(self.pool)):
            entry = self.pool.current
            try:
                return self._open(entry, task)
            except _CallFailed as exc:
                problems.append(str(exc))
                self.pool.demote(entry, str(exc))
        raise DeviceUnavailable(
            f"no environment server could start task {task.name!r}: {'; '.join(problems)}. "
            "Check each with `curl URL/health`, or add spare servers to the server file")

    def _open(self, entry: str, task: Task) -> str:
        opts = self.options
        url, _, wanted = entry.partition("#")
        health = self._retrying(f"{url}/health", lambda: self._call(
            "GET", "/health", url=url, timeout=opts.health_timeout_s))
        device = self._pick_device(url, health, wanted or None)
        init = self._retrying(f"{url}/init", lambda: self._call(
            "POST", "/init", url=url, timeout=opts.init_timeout_s, params={"device": device}))
        self._screen = _viewport(url, init)
        body = {"task_name": task.name, "req_device": device}
        try:
            goal = task.goal
            if goal is None:
                goal = self._call("GET", "/task/goal", url=url, timeout=opts.init_timeout_s,
                                  params={"task_name": task.name})
                if not isinstance(goal, str) or not goal.strip():
                    raise _CallFailed(f"GET {url}/task/goal: expected the goal as a JSON string, "
                                      f"got {goal!r}")
            self._retrying(f"{url}/task/init", lambda: self._call(
                "POST", "/task/init", url=url, timeout=opts.init_timeout_s, json=body))
        except _CallFailed as exc:
            if not exc.refused:
                raise
            # another server would refuse the same task: no rotation, the caller skips it
            raise DeviceError(f"server {url} refused task {task.name!r}: {exc}; `curl "
                              f"{url}/task/list` lists the tasks it knows") from None
        self._entry, self._url, self._device = entry, url, device
        log.info("task %s started on %s (%s, %dx%d)", task.name, url, device,
                 self._screen.width, self._screen.height)
        return goal

    @staticmethod
    def _pick_device(url: str, health: Any, wanted: str | None) -> str:
        if not isinstance(health, dict) or not health.get("ok"):
            raise _CallFailed(f"GET {url}/health: server reports unhealthy: {str(health)[:200]}")
        devices = health.get("devices") or []
        status = health.get("device_status") or {}
        if wanted is not None:
            if wanted not in devices:
                raise _CallFailed(f"GET {url}/health: device {wanted!r} is not served here "
                                  f"(devices: {devices})")
            return wanted
        ready = [d for d in devices if status.get(d, True)]
        if not ready:
            raise _CallFailed(f"GET {url}/health: no ready device (devices: {devices}, "
                              f"status: {status})")
        return ready[0]

    def evaluate(self, task: Task) -> Evaluation:
        body = {"task_name": task.name, "req_device": self._device}
        try:
            answer = self._retrying("task evaluation", lambda: self._call(
                "GET", "/task/eval", timeout=self.options.eval_timeout_s, json=body))
        except _CallFailed as exc:
            raise EnvironmentLost(f"evaluation failed: {exc}") from None
        try:
            return Evaluation(float(answer["score"]), str(answer.get("reason") or ""))
        except (KeyError, TypeError, ValueError):
            raise EnvironmentLost(f"evaluation answer has no numeric score: {str(answer)[:200]}") from None

    def end_task(self, task: Task) -> None:
        if self._url is None:
            return
        body = {"task_name": task.name, "req_device": self._device}
        try:
            self._call("POST", "/task/tear_down", timeout=self.options.tear_down_timeout_s, json=body)
        except _CallFailed as exc:
            log.warning("tear down of %s on %s failed: %s", task.name, self._url, exc)
            if self._entry is not None:
                self.pool.demote(self._entry, f"tear down failed: {exc}")
        finally:
            self._entry = self._url = None

    # --- observing and acting ----------------------------------------------------------------

    def screen(self) -> Screen:
        if self._screen is None:
            raise DeviceError("the screen size is known once a task has started (start_task)")
        return self._screen

    def screenshot(self) -> bytes:
        self._shots += 1
        params = {"device": self._device, "prefix": f"step{self._shots}", "return_b64": "true"}

        def fetch() -> bytes:
            answer = self._call("GET", "/screenshot", timeout=self.options.screenshot_timeout_s,
                                params=params)
            return _decode_screenshot(self._session_url(), answer)

        try:
            return self._retrying("screenshot", fetch)
        except _CallFailed as exc:
            self._lose(f"screenshot failed: {exc}")

    def execute(self, action: ParsedAction) -> ActionResult:
        json_action = to_json_action(action, self.screen())
        body = {"device": self._device, "action": json_action}
        timeouts = self.options.step_timeouts_s
        for i, timeout in enumerate(timeouts):
            try:
                answer = self._call("POST", "/step", timeout=timeout, json=body)
                break
            except _CallFailed as exc:
                if exc.refused:
                    raise ActionFailed(f"the server rejected {json_action}: {exc}") from None
                if not exc.timeout or i == len(timeouts) - 1:
                    self._lose(f"step failed: {exc}")
                log.warning("step timed out after %gs; retrying with %gs", timeout, timeouts[i + 1])
        else:  # only when there is no timeout to try
            self._lose("step failed: no step timeouts are configured")
        result = answer.get("result", "") if isinstance(answer, dict) else ""
        return ActionResult(result if isinstance(result, str) else str(result), [json_action])

    def _lose(self, reason: str) -> NoReturn:
        """The server is gone for this episode: the next task starts on another one."""
        url = self._session_url()
        if self._entry is not None:
            self.pool.demote(self._entry, reason)
        self._entry = self._url = None  # nothing left to tear down there
        raise EnvironmentLost(f"environment server {url} lost: {reason}")

    def close(self) -> None:
        self._http.close()


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    return str(body.get("detail", body) if isinstance(body, dict) else body)[:300]


def _viewport(url: str, init: Any) -> Screen:
    try:
        width, height = init["viewport_size"]
        return Screen(int(width), int(height))
    except (KeyError, TypeError, ValueError):
        raise _CallFailed(f"POST {url}/init: expected viewport_size [w, h], got {str(init)[:200]}") from None


def _decode_screenshot(url: str, answer: Any) -> bytes:
    encoded = answer.get("b64_png") if isinstance(answer, dict) else None
    if not isinstance(encoded, str):
        raise _CallFailed(f"GET {url}/screenshot: no b64_png in the answer: {str(answer)[:200]}")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise _CallFailed(f"GET {url}/screenshot: b64_png is not valid base64") from None
    if not data.startswith(_IMAGE_MAGIC):
        raise _CallFailed(f"GET {url}/screenshot: b64_png is not an image (starts {data[:8]!r})")
    return data


# --- the device kind: `elake collect remote`, `elake rerun --env mobileworld` ---------------

@dataclass(frozen=True)
class RemoteSpec:
    """Servers (first, then spares) to open a `RemoteDevice` on where the worker runs."""

    urls: tuple[str, ...]
    options: RemoteOptions = RemoteOptions()

    def open(self) -> Device:
        return RemoteDevice(self.urls, options=self.options)


def split_servers(urls: Sequence[str], workers: int,
                  options: RemoteOptions | None = None) -> list[RemoteSpec]:
    """One RemoteSpec per worker: worker i uses server i and, as its spares, every
    `workers`-th server after it (the reference's active servers then spare pool)."""
    if len(urls) < workers:
        raise InvalidInput(f"{workers} workers need at least {workers} server entries, got "
                           f"{len(urls)}; a server with several devices can be listed once per "
                           "device as URL#DEVICE")
    return [RemoteSpec(tuple(urls[i::workers]), options or RemoteOptions()) for i in range(workers)]


def _collection(values: dict[str, Any]) -> Collection:
    urls = values["server"] or read_server_file(values["server_file"])
    return Collection(split_servers(urls, values["workers"], RemoteOptions(token=values["token"])))


def _rerun_spec(target: RerunTarget) -> RemoteSpec:
    return RemoteSpec(tuple(target.servers))


def _rerun_check(target: RerunTarget) -> None:
    if not target.servers:
        raise InvalidInput("env mobileworld needs servers (--server URL, one or more)")


DEVICE = DeviceKind(
    name="remote", summary="phones behind ClawGUI-Server / MobileWorld servers", doc=__doc__,
    description="Drive environment servers over their HTTP API. Servers that fail move to the back "
    "of the list (spares).",
    options=(
        DeviceOption("server", list[str] | None, "server URL, or URL#DEVICE (repeatable)", metavar="URL"),
        DeviceOption("server_file", Path | None, "file with one server URL a line"),
        DeviceOption("token", str | None, "bearer token for the servers", show_default=False,
                     from_env="env_token"),
    ),
    task_help="a task name the servers know (repeatable)",
    collect=_collection,
    policies=("random",),
    workers=True,
    exclusive=(Exclusive(("server", "server_file"), required=True),),
    rerun=RerunDevice(RemoteDevice.env, _rerun_spec, check=_rerun_check),
)
