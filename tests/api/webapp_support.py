"""Shared by the API and browser tests: a small deterministic lake and a real server thread.

The lake is recorded through the real Recorder (real PNGs, real parsing, real anchor keys):
three tasks, each one episode group of three episodes whose steps k show the same screen,
so anchor-state groups exist. Every action type appears, one step has a zero step reward,
one model response carries HTML that must never run, and one step has no screenshot.
"""

from __future__ import annotations

import io
import socket
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import uvicorn
from PIL import Image, ImageDraw

from episodelake.api.app import create_app
from episodelake.api.settings import Settings
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.storage.lake import Lake
from episodelake.lake.vocab.families import format_tool_call
from tests.waiting import wait_for

TASKS = {
    "wifi_on": "Turn on Wi-Fi",
    "set_alarm": "Set an alarm for 7:30",
    "send_message": "Send 'hi' to Ana",
}
ACTIONS = [
    {"action": "click", "coordinate": [500, 300]},
    {"action": "long_press", "coordinate": [250, 700]},
    {"action": "swipe", "direction": "up", "coordinate": [500, 800]},
    {"action": "drag", "start_coordinate": [100, 200], "end_coordinate": [800, 900]},
    {"action": "type", "text": "<img src=x onerror=\"window.__xss=1\">hello"},
    {"action": "system_button", "button": "back"},
    {"action": "terminate", "status": "success"},
]
XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">'


def screen(task_index: int, step: int, size: tuple[int, int] = (270, 600)) -> bytes:
    """A PNG that is the same for a (task, step) in every episode: one anchor per step."""
    img = Image.new("RGB", size, (40 + 60 * task_index, 80 + 25 * step, 200 - 20 * step))
    d = ImageDraw.Draw(img)
    d.rectangle((20, 60 + 40 * step, 250, 100 + 40 * step), fill=(250, 250, 250))
    d.ellipse((30 + 30 * task_index, 300, 90 + 30 * task_index, 360), fill=(10, 10, 10))
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def build_lake(path: Path) -> Lake:
    """The test lake (see the module docstring); ids are `<task>-<i>`, groups `g-<task>`."""
    lake = Lake(path)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    # hashed and keyed as written: a server's background worker then finds nothing to fill
    with Recorder(lake, run_id="run-1", env="sim", model_name="tiny", image_checks="decode") as rec:
        for t, (task, goal) in enumerate(TASKS.items()):
            for i in range(3):
                ep = rec.start_episode(task, goal, episode_id=f"{task}-{i}", group_id=f"g-{task}",
                                       policy_version=str(10 * (i + 1)), tags=["smoke"] if i == 0 else [],
                                       created_at=start + timedelta(minutes=10 * t + i))
                length = 4 + i
                for k in range(length):
                    action = ACTIONS[k % len(ACTIONS)] if k < length - 1 else ACTIONS[-1]
                    thinking = f"step {k} of {task}" + (f" {XSS}" if k == 1 else "")
                    lost = (task, i, k) == ("send_message", 2, 2)
                    ep.log_step(None if lost else screen(t, k), format_tool_call(action, thinking),
                                image_missing="the device returned no screenshot" if lost else None,
                                reward=1.0 if (k == length - 1 and i != 1) else 0.0,
                                step_reward=0.0 if (i == 1 and k == 1) else 1.0,
                                step_reward_reason="went the wrong way" if (i == 1 and k == 1) else "progress",
                                prompt=[{"role": "user", "content": goal}])
                ep.finish(success=i != 1, eval_score=0.0 if i == 1 else 1.0)
    return lake


class ServerThread:
    """A real uvicorn server for `settings`, on a free port of `settings.host`, in a thread."""

    def __init__(self, settings: Settings, lake: Lake | None = None):
        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind((settings.host, 0))
        self.port = self.sock.getsockname()[1]
        self.host = settings.host
        config = uvicorn.Config(create_app(settings, lake), log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def __enter__(self) -> ServerThread:
        self.thread.start()

        def started() -> bool:
            assert self.thread.is_alive(), "the test server's thread ended before it started serving"
            return self.server.started

        wait_for(started, 20, every_s=0.02, what="the test server to start")
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


def error_of(response) -> dict:
    """The API's one error shape, `{"error": {"type", "message"}}`, checked and unwrapped."""
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}, body
    return body["error"]
