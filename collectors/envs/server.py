"""An environment server speaking the ClawGUI-Server / MobileWorld HTTP API over any devices.

`elake serve-env --sim` serves simulated phones through it, so RL infrastructure written for
that API (ours included: :class:`~episodelake.collectors.envs.remote.RemoteDevice`) can be
run and tested on a CPU machine with no emulator. Endpoints, as the reference server shapes
them (see docs/recording.md for the full table):

``GET /health``, ``GET|POST /init?device=``, ``GET /screenshot?device=&return_b64=``,
``POST /step``, ``GET /task/list``, ``GET /task/goal?task_name=``, ``POST /task/init``,
``GET /task/eval`` (JSON body, as the reference's clients send it), ``POST /task/tear_down``.

Deliberately absent: the reference's ``/download?path=``, which serves any file of the host
to anyone. Screenshots travel inline as base64 only. The server binds 127.0.0.1 by default;
any other bind needs a token, checked on every request as ``Authorization: Bearer``.
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from episodelake.collectors.envs.base import Device, Task
from episodelake.collectors.envs.jsonaction import from_json_action
from episodelake.lake.storage.errors import ActionFailed, DeviceError, InvalidInput

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskInfo:
    """A task as ``/task/list`` shows it."""

    name: str
    goal: str
    tags: list[str] = field(default_factory=list)
    apps: list[str] = field(default_factory=list)


class StepBody(BaseModel):
    device: str | None = None
    action: dict[str, Any]


class TaskBody(BaseModel):
    task_name: str
    req_device: str | None = None


class _Slot:
    """One served device, the lock that keeps its requests in order, and its current task."""

    def __init__(self, name: str, device: Device):
        self.name = name
        self.device = device
        self.lock = threading.Lock()
        self.task: Task | None = None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def create_app(devices: Mapping[str, Device], tasks: Sequence[TaskInfo], *,
               token: str | None = None) -> FastAPI:
    """The API over `devices` (by id) and the task registry `tasks`."""
    if not devices:
        raise InvalidInput("an environment server needs at least one device")
    slots = {name: _Slot(name, device) for name, device in devices.items()}
    catalog = {t.name: t for t in tasks}
    app = FastAPI(title="EpisodeLake environment server",
                  description="ClawGUI-Server / MobileWorld compatible API over simulated phones.")

    if token:
        @app.middleware("http")
        async def require_token(request: Request, call_next: Any) -> Any:
            sent = request.headers.get("authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
                return JSONResponse({"detail": "missing or wrong token: send "
                                     "'Authorization: Bearer <token>'"}, status_code=401)
            return await call_next(request)

    def slot(device: str | None) -> _Slot:
        if device is None:
            device = next(iter(slots))
        if device not in slots:
            raise HTTPException(404, f"no device {device!r}; devices: {', '.join(slots)}")
        return slots[device]

    def known(task_name: str) -> TaskInfo:
        if task_name not in catalog:
            raise HTTPException(404, f"no task {task_name!r}; GET /task/list lists them")
        return catalog[task_name]

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"ok": True, "devices": list(slots), "device_status": {d: True for d in slots}}

    @app.api_route("/init", methods=["GET", "POST"])
    def init(device: str | None = None) -> dict[str, Any]:
        s = slot(device)
        screen = s.device.screen()
        return {"device": s.name, "viewport_size": [screen.width, screen.height]}

    @app.get("/screenshot")
    def screenshot(device: str | None = None, prefix: str = "", return_b64: bool = True) -> dict[str, Any]:
        s = slot(device)
        with s.lock:
            data = s.device.screenshot()
        # no file is written on the server: `path` stays null and the image comes inline
        return {"device": s.name, "path": None, "b64_png": base64.b64encode(data).decode("ascii")}

    @app.post("/step")
    def step(body: StepBody) -> dict[str, Any]:
        s = slot(body.device)
        with s.lock:
            try:
                parsed = from_json_action(body.action, s.device.screen())
            except ValueError as exc:
                raise HTTPException(422, str(exc)) from None
            if not parsed.valid:
                raise HTTPException(422, parsed.error)
            try:
                result = s.device.execute(parsed)
            except ActionFailed as exc:
                raise HTTPException(422, str(exc)) from None
        return {"device": s.name, "action": body.action, "result": result.result}

    @app.get("/task/list")
    def task_list() -> list[dict[str, Any]]:
        return [{"name": t.name, "tags": t.tags, "apps": t.apps} for t in catalog.values()]

    @app.get("/task/goal")
    def task_goal(task_name: str) -> str:
        return known(task_name).goal

    @app.post("/task/init")
    def task_init(body: TaskBody) -> str:
        info = known(body.task_name)
        s = slot(body.req_device)
        with s.lock:
            task = Task(info.name, info.goal)
            try:
                s.device.start_task(task)
            except DeviceError as exc:
                raise HTTPException(500, f"task {info.name!r} could not start: {exc}") from None
            s.task = task
        return "OK"

    @app.get("/task/eval")
    def task_eval(body: TaskBody) -> dict[str, Any]:
        known(body.task_name)
        s = slot(body.req_device)
        with s.lock:
            if s.task is None or s.task.name != body.task_name:
                raise HTTPException(409, f"task {body.task_name!r} is not running on this device; "
                                         "POST /task/init first")
            evaluation = s.device.evaluate(s.task)
        if evaluation is None:
            raise HTTPException(501, "this device has no task evaluator")
        return {"score": evaluation.score, "reason": evaluation.reason}

    @app.post("/task/tear_down")
    def task_tear_down(body: TaskBody) -> str:
        known(body.task_name)
        s = slot(body.req_device)
        with s.lock:
            if s.task is not None:
                s.device.end_task(s.task)
                s.task = None
        return "OK"

    return app


def serve(devices: Mapping[str, Device], tasks: Sequence[TaskInfo], *, host: str = "127.0.0.1",
          port: int = 6800, token: str | None = None) -> None:
    """Run the server until interrupted; refuses a non-loopback bind without a token."""
    import uvicorn

    if not is_loopback(host) and not token:
        raise InvalidInput(f"binding {host} exposes the phones to the network: pass --token "
                           "(clients send it as 'Authorization: Bearer <token>'), or bind 127.0.0.1")
    app = create_app(devices, tasks, token=token)
    log.info("environment server on http://%s:%d with %d device(s)", host, port, len(devices))
    uvicorn.run(app, host=host, port=port, log_level="warning")
