"""Helpers for the collectors' tests: live loopback servers (uvicorn in a thread), a fake
OpenAI-compatible model server answering from a script, scripted policies, `elake` in-process."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import deque

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from episodelake.collectors.envs.base import Task
from episodelake.collectors.envs.sim.device import SimDevice
from episodelake.collectors.loop import Reply
from episodelake.lake.vocab.families import format_tool_call, parse_response
from tests.waiting import wait_for


class LiveServer:
    """A FastAPI app served by uvicorn on a free loopback port, in a thread."""

    def __init__(self, app: FastAPI):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]},
                                       daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, 10, every_s=0.01, what="the test server to start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def oracle_script(task: str, seed: int = 0) -> list[dict]:
    """The oracle's actions for `task` from a fresh phone, ending with terminate: the sim is
    deterministic, so replaying them anywhere (over HTTP) solves the task."""
    device = SimDevice(seed)
    device.start_task(Task(task))
    actions = []
    while True:
        action = device.task.solution(device.phone)
        actions.append(action)
        if action["action"] == "terminate":
            return actions
        device.execute(parse_response(format_tool_call(action)))


class ScriptedPolicy:
    """Answers step N with the N-th action of a script (hooks may run before a step)."""

    name = "scripted"
    history_length = 0

    def __init__(self, actions: list[dict], before_step: dict | None = None):
        self.actions = actions
        self.before_step = before_step or {}

    def act(self, observation) -> Reply:
        hook = self.before_step.get(observation.step)
        if hook is not None:
            hook()
        return Reply(format_tool_call(self.actions[observation.step]))


class FakeModel:
    """An OpenAI-compatible chat completions server whose answers come from a queue:
    each item is answer text, or (status, body) for an error, or ("sleep", seconds, text)."""

    def __init__(self, live):
        self.answers: deque = deque()
        self.requests: list[dict] = []
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request):
            self.requests.append(await request.json())
            item = self.answers.popleft() if self.answers else "no answer scripted"
            if isinstance(item, tuple) and item[0] == "sleep":
                await asyncio.sleep(item[1])
                item = item[2]
            if isinstance(item, tuple):
                status, body = item
                return PlainTextResponse(body, status_code=status)
            return JSONResponse({"choices": [{"message": {"role": "assistant", "content": item}}]})

        self.server = live(app)
        self.url = f"{self.server.url}/v1"

    def script(self, *items) -> None:
        self.answers.extend(items)


def elake(argv: list[str]) -> int:
    """Run the `elake` command line in-process."""
    from episodelake.api import cli

    return cli.main(argv)
