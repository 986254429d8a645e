"""Recorder: the one call per step that a rollout loop makes to put an episode in the lake.

```python
rec = Recorder("elake-data", run_id="run-7", policy_version="ckpt-40", env="sim")
with rec.start_episode("wifi_on", "Turn on Wi-Fi", group_id="g-12") as ep:
    ep.log_step(png_bytes, response_text, reward=0.0)
    ...
    ep.finish(success=True, eval_score=1.0)
rec.close()
```
A step is acknowledged when `log_step` returns: it is in the writer's spool by then, so a
crash loses nothing acknowledged. An exception inside the `with` block marks the episode
aborted and keeps its steps. Everything a step row needs (image checks and hashes, the
parsed action, the anchor key) is computed here, once, on the write path.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from episodelake.collectors.actions import parse_response
from episodelake.collectors.images import prepare_image
from episodelake.lake import Lake, WriterOptions
from episodelake.lake.errors import Conflict, InvalidInput
from episodelake.lake.layout import check_id

log = logging.getLogger(__name__)


class AnchorKeyer(Protocol):
    """Turns a step's screen into its anchor key (the GiGPO anchor state)."""

    def key(self, group_id: str, *, phash: int | None = None, ui_tree: str | None = None) -> str: ...


def now() -> datetime:
    return datetime.now(UTC)


def _text(value: object, name: str) -> str | None:
    """Text fields must be valid UTF-8 strings (bytes are decoded strictly)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{name}: not valid UTF-8 ({exc})") from None
    if not isinstance(value, str):
        raise InvalidInput(f"{name}: expected text, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{name}: not valid UTF-8 ({exc})") from None
    return value


def _number(value: object, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name}: expected a number, not {type(value).__name__}")
    if not math.isfinite(value):
        raise InvalidInput(f"{name}: must be a finite number, not {value}")
    return float(value)


def _json(value: object, name: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return _text(value, name)
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
    except ValueError as exc:
        raise InvalidInput(f"{name}: not JSON-serialisable ({exc})") from None


def build_step_row(
    episode_id: str,
    step: int,
    image: object,
    model_response: object,
    *,
    timestamp: datetime | None = None,
    reward: float | None = None,
    step_reward: float | None = None,
    step_reward_reason: str | None = None,
    prompt: object = None,
    info: object = None,
    ui_tree: str | None = None,
    group_id: str | None = None,
    anchor: AnchorKeyer | None = None,
    decode_images: bool = True,
) -> dict:
    """A validated `steps` row. Shared by the recorder and the importers.

    `image=None` is allowed only for imports of steps whose screenshot is lost; the row then
    says so in `info` instead of carrying any stand-in image.
    """
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise InvalidInput(f"step: must be a non-negative integer, not {step!r}")
    response = _text(model_response, "model_response") or ""
    parsed = parse_response(response)
    row = {
        "episode_id": episode_id,
        "step": step,
        "timestamp": timestamp or now(),
        "model_response": response,
        "reward": _number(reward, "reward"),
        "step_reward": _number(step_reward, "step_reward"),
        "step_reward_reason": _text(step_reward_reason, "step_reward_reason"),
        "prompt": _json(prompt, "prompt"),
        "info": _json(info, "info"),
        **parsed.to_row(),
    }
    tree = _text(ui_tree, "ui_tree")
    if tree is not None:
        from episodelake.collectors.anchor import ui_tree_hash

        row["ui_tree_hash"] = ui_tree_hash(tree)
    if image is not None:
        img = prepare_image(image, decode=decode_images)
        row.update(image=img.data, image_format=img.format, image_sha256=img.sha256,
                   image_phash=img.phash, width=img.width, height=img.height)
    if anchor is not None and (tree is not None or row.get("image_phash") is not None):
        row["anchor_key"] = anchor.key(group_id or "", phash=row.get("image_phash"), ui_tree=tree)
    return row


@dataclass
class StepRecord:
    """What `log_step` hands back: the stored step's identity and hashes."""

    episode_id: str
    step: int
    image_sha256: str | None
    anchor_key: str | None
    action_type: str
    action_valid: bool


@dataclass
class EpisodeHandle:
    recorder: Recorder
    row: dict
    steps: set[int] = field(default_factory=set)
    rewards: list[float] = field(default_factory=list)
    finished: bool = False

    @property
    def episode_id(self) -> str:
        return self.row["episode_id"]

    def log_step(self, image: object, model_response: object = "", *, step: int | None = None,
                 reward: float | None = None, step_reward: float | None = None,
                 step_reward_reason: str | None = None, prompt: object = None, info: object = None,
                 ui_tree: str | None = None, timestamp: datetime | None = None) -> StepRecord:
        """Record one step: the screen the agent saw and its response. Returns once durable."""
        if self.finished:
            raise Conflict(f"episode {self.episode_id} is {self.row['status']}: log_step after finish")
        if step is None:
            step = max(self.steps) + 1 if self.steps else 0
        if step in self.steps:
            raise Conflict(f"episode {self.episode_id} already has step {step}")
        row = build_step_row(
            self.episode_id, step, image, model_response, timestamp=timestamp, reward=reward,
            step_reward=step_reward, step_reward_reason=step_reward_reason, prompt=prompt,
            info=info, ui_tree=ui_tree, group_id=self.row.get("group_id"),
            anchor=self.recorder.anchor, decode_images=self.recorder.image_checks == "decode",
        )
        self.recorder.writer.append("steps", row)
        self.steps.add(step)
        if row["reward"] is not None:
            self.rewards.append(row["reward"])
        return StepRecord(self.episode_id, step, row.get("image_sha256"), row.get("anchor_key"),
                          row["action_type"], row["action_valid"])

    def finish(self, success: bool | None = None, eval_score: float | None = None,
               eval_reason: str | None = None, *, episode_reward: float | None = None,
               episode_length: int | None = None, status: str = "finished",
               extra: dict | None = None) -> dict:
        """Close the episode with its result (the reference's final backfill)."""
        if self.finished:
            raise Conflict(f"episode {self.episode_id} is already {self.row['status']}")
        if status not in ("finished", "aborted"):
            raise InvalidInput(f"status: must be 'finished' or 'aborted', not {status!r}")
        eval_score = _number(eval_score, "eval_score")
        if success is None and eval_score is not None:
            success = eval_score > 0
        if episode_reward is None:
            episode_reward = sum(self.rewards) if self.rewards else eval_score
        merged_extra = {**json.loads(self.row.get("extra") or "{}"), **(extra or {})}
        self.row.update(
            status=status,
            success=success,
            eval_score=eval_score,
            eval_reason=_text(eval_reason, "eval_reason") or "",
            episode_reward=_number(episode_reward, "episode_reward"),
            episode_length=episode_length if episode_length is not None else len(self.steps),
            finished_at=now(),
            extra=_json(merged_extra, "extra") if merged_extra else None,
        )
        self.recorder.writer.append("episodes", dict(self.row))
        self.finished = True
        self.recorder._forget(self)
        return dict(self.row)

    def abort(self, reason: str) -> dict:
        return self.finish(status="aborted", eval_reason=f"aborted: {reason}")

    def __enter__(self) -> EpisodeHandle:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.finished:
            return
        if exc_type is not None:
            self.abort(f"{exc_type.__name__}: {exc}")
        else:
            self.finish(status="finished")


class Recorder:
    """Opens one lake writer and hands out episode handles. Thread-safe per episode."""


    def __init__(self, lake: Lake | Path | str | None = None, *, options: WriterOptions | None = None,
                 anchor: AnchorKeyer | None | str = "default", image_checks: str = "decode",
                 run_id: str | None = None,
                 policy_version: str | None = None, env: str | None = None,
                 device: str | None = None, model_name: str | None = None):
        self.lake = lake if isinstance(lake, Lake) else Lake(lake)
        self.writer = self.lake.writer(options)
        if anchor == "default":
            from episodelake.collectors.anchor import AnchorKeyer as DefaultKeyer

            anchor = DefaultKeyer()
        self.anchor = anchor
        if image_checks not in ("decode", "structure"):
            raise InvalidInput(f"image_checks: 'decode' or 'structure', not {image_checks!r}")
        #: "decode" proves every image whole and gives perceptual hashes (anchor keys);
        #: "structure" checks chunks/markers only, ~40x cheaper, no perceptual hash.
        self.image_checks = image_checks
        self.defaults = {"run_id": run_id, "policy_version": policy_version, "env": env,
                         "device": device, "model_name": model_name}
        self._open: dict[str, EpisodeHandle] = {}
        self._lock = threading.Lock()

    def start_episode(self, task_name: str, task_goal: str = "", *, episode_id: str | None = None,
                      group_id: str | None = None, tags: Iterable[str] = (), extra: dict | None = None,
                      created_at: datetime | None = None, **fields: str | None) -> EpisodeHandle:
        """Begin an episode; `fields` override the recorder's run_id, policy_version, env,
        device and model_name for this episode."""
        unknown = set(fields) - set(self.defaults)
        if unknown:
            raise InvalidInput(f"start_episode: unknown field(s) {sorted(unknown)}")
        episode_id = check_id(str(uuid.uuid4()) if episode_id is None else episode_id, "episode_id")
        if group_id is not None:
            check_id(group_id, "group_id")
        row = {
            "episode_id": episode_id,
            "task_name": _text(task_name, "task_name"),
            "task_goal": _text(task_goal, "task_goal"),
            "group_id": group_id,
            "created_at": created_at or now(),
            "status": "running",
            "tags": [check_id(t, "tag") for t in tags],
            "extra": _json(extra, "extra"),
            **{k: _text(fields.get(k, v), k) for k, v in self.defaults.items()},
        }
        handle = EpisodeHandle(self, row)
        with self._lock:
            if episode_id in self._open:
                raise Conflict(f"episode {episode_id} is already being recorded")
            self._open[episode_id] = handle
        self.writer.append("episodes", dict(row))
        return handle

    def episode(self, episode_id: str) -> EpisodeHandle | None:
        """The open handle of an episode recorded by this recorder, if any."""
        with self._lock:
            return self._open.get(episode_id)

    def _forget(self, handle: EpisodeHandle) -> None:
        with self._lock:
            self._open.pop(handle.episode_id, None)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        """Commit what is pending. Episodes still open stay `running` in the lake."""
        with self._lock:
            still_open = list(self._open)
        if still_open:
            log.warning("closing the recorder with %d episode(s) still running", len(still_open))
        self.writer.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
