"""Deterministic test data: real PNG screenshots drawn with Pillow, MAI-UI responses, ClawGUI-RL
episode folders."""

from __future__ import annotations

import importlib.util
import io
import json
import multiprocessing
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from episodelake.lake.export.clawgui import task_dir_name

#: The repository: a child Python process finds the `tests` package (and these helpers) here.
REPO = Path(__file__).resolve().parents[1]


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a `python -c` child that imports `tests.factories`: `base` (by
    default this process's) with the repository put first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


#: For the tests that start Ray (a local cluster, or actors through the command line).
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="Ray is not installed: pip install 'ray[default]' (the ray extra)")


def screenshot(seed: int = 0, size: tuple[int, int] = (108, 240), clock: str = "12:00",
               fmt: str = "PNG") -> bytes:
    """A phone-like screen: a status bar with a clock and blocks whose layout depends on seed."""
    img = Image.new("RGB", size, (245, 245, 245))
    d = ImageDraw.Draw(img)
    w, h = size
    d.rectangle((0, 0, w, int(h * 0.04)), fill=(30, 30, 30))
    d.text((2, 0), clock, fill=(255, 255, 255))
    rng = (seed * 2654435761) & 0xFFFFFFFF
    for i in range(4):
        rng = (rng * 1103515245 + 12345) & 0x7FFFFFFF
        top = int(h * 0.1) + i * h // 5
        left = rng % (w // 2)
        colour = ((rng >> 3) % 256, (rng >> 7) % 256, (rng >> 11) % 256)
        d.rectangle((left, top, left + w // 3, top + h // 8), fill=colour)
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


def response(action: str = "click", thinking: str = "tap the button", **arguments) -> str:
    args = {"action": action, **arguments}
    if action in ("click", "long_press") and "coordinate" not in args:
        args["coordinate"] = [500, 500]
    call = json.dumps({"name": "mobile_use", "arguments": args})
    return f"<thinking>{thinking}</thinking>\n<tool_call>\n{call}\n</tool_call>"


def write_reference_episode(root: Path, task: str, episode_id: str, steps: int, *, finished=True,
                            null_image_at: int | None = None) -> Path:
    """An episode folder exactly as the reference writes it (absolute image paths)."""
    folder = root / task_dir_name(task) / episode_id
    (folder / "images").mkdir(parents=True)
    records = []
    for n in range(steps):
        path = folder / "images" / f"step_{n:04d}.png"
        path.write_bytes(screenshot(n))
        records.append({"step": n, "image_path": None if n == null_image_at else str(path.resolve()),
                        "model_response": response("click", coordinate=[10 * n, 20]),
                        "timestamp": f"2026-11-30T10:00:{n:02d}.000001",
                        "step_reward": 1.0, "step_reward_reason": "progress"})
    meta = {"task_name": task, "task_goal": f"do {task}", "episode_id": episode_id,
            "created_at": "2026-11-30T10:00:00.000001"}
    if finished:
        meta.update(success=True, eval_score=1.0, eval_reason="", episode_reward=1.5,
                    episode_length=steps, finished_at="2026-11-30T10:01:00.000001")
    (folder / "episode.json").write_text(json.dumps({"meta_data": meta, "episode": records}))
    return folder


def text_screen(*lines: str, size: tuple[int, int] = (360, 200)) -> bytes:
    """A small screen showing `lines` in large dark type (what OCR tests read back)."""
    from PIL import ImageFont

    img = Image.new("RGB", size, (250, 250, 250))
    d = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=26)
    for i, line in enumerate(lines):
        d.text((16, 20 + i * 44), line, fill=(20, 20, 20), font=font)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def race(target: Callable[..., None], *args: object, ids: list[str], racers: int = 3) -> list[tuple]:
    """Run `target(*args, ids, barrier, results)` in `racers` spawned processes (Lance's runtime
    does not survive a fork) and return what they put on `results`: one tuple per process and id.
    Every process must exit 0."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(racers), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, ids, barrier, results)) for _ in range(racers)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=300) for _ in range(len(ids) * racers)]
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    return outcomes


def free_port() -> int:
    """A loopback TCP port nothing listens on now (for a server started next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
