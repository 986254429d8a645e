"""ClawGUI-RL compatibility: drop-in recording functions, folder import, export and watch.

Drop-in: replace the reference's import with

    from episodelake.collectors.clawgui import save_episode_to_json, update_episode_result

and every call records into the lake instead of rewriting `episode.json`. Same names,
arguments and meaning; the lake is `$ELAKE_LAKE`, else the `save_dir` passed, else
`./elake-data`. Two deliberate differences: bad input raises `InvalidInput` instead of being
printed and swallowed, and images are stored as received instead of decoded and re-encoded.

Folders (FORMATS.md section 1): `<root>/<task_dir>/<episode_id>/episode.json` plus
`images/step_NNNN.png`. Import is idempotent (keys), tolerant of moved folders (absolute
image paths that no longer exist are looked up beside the JSON), and reports what it skipped.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

from episodelake.collectors.recorder import Recorder, build_step_row, now
from episodelake.lake import Lake, WriterOptions
from episodelake.lake.errors import InvalidInput, LakeError, NotFound
from episodelake.lake.layout import LAKE_ENV, check_id
from episodelake.lake.writer import LakeWriter

log = logging.getLogger(__name__)

REFERENCE_SAVE_DIR = "./clawgui-rl/episode"
EPISODE_FILE = "episode.json"
IMAGE_DIR = "images"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


def task_dir_name(task_name: str | None) -> str:
    """The reference's folder name for a task: spaces and '/' become '_'."""
    if not task_name:
        return "unknown_task"
    return task_name.replace(" ", "_").replace("/", "_")


# -- drop-in recording functions ------------------------------------------------------------
_recorders: dict[str, Recorder] = {}
_recorders_lock = threading.Lock()


def _recorder(save_dir: str | None) -> Recorder:
    path = os.environ.get(LAKE_ENV) or (save_dir if save_dir and save_dir != REFERENCE_SAVE_DIR else None) or "./elake-data"
    key = str(Path(path).resolve())
    with _recorders_lock:
        rec = _recorders.get(key)
        if rec is None:
            rec = _recorders[key] = Recorder(key, env="clawgui")
        return rec


@atexit.register
def close_recorders() -> None:
    """Commit everything the drop-in functions recorded (also runs at interpreter exit)."""
    with _recorders_lock:
        for rec in _recorders.values():
            rec.close()
        _recorders.clear()


def save_episode_to_json(obs_images, text_actions, task_name, task_goal, episode_id,
                         save_dir: str = REFERENCE_SAVE_DIR, step_number: int = 0,
                         step_reward: float | None = None, step_reward_reason: str | None = None) -> str:
    """Record step `step_number` of an episode (one base64 PNG and one response per call).

    Returns the lake folder the step went to (the reference returned its JSON path).
    """
    images = list(obs_images) if isinstance(obs_images, (list, tuple)) else [obs_images]
    actions = list(text_actions) if isinstance(text_actions, (list, tuple)) else [text_actions]
    if len(images) != 1 or len(actions) != 1:
        raise InvalidInput(
            f"obs_images/text_actions: expected one image and one response per call, got {len(images)} and {len(actions)}"
        )
    rec = _recorder(save_dir)
    handle = rec.episode(episode_id)
    if handle is None:
        handle = rec.start_episode(task_name or "", task_goal or "No goal specified", episode_id=episode_id)
    handle.log_step(images[0], actions[0], step=int(step_number), step_reward=step_reward,
                    step_reward_reason=step_reward_reason)
    return str(rec.lake.path)


def update_episode_result(task_name, episode_id, eval_score, eval_reason, episode_reward,
                          episode_length, save_dir: str = REFERENCE_SAVE_DIR) -> bool:
    """Fill an episode's final result. Returns False (with a warning) for an unknown episode."""
    rec = _recorder(save_dir)
    handle = rec.episode(episode_id)
    score = float(eval_score) if eval_score is not None else 0.0
    if handle is not None:
        handle.finish(success=score > 0, eval_score=score, eval_reason=eval_reason or "",
                      episode_reward=episode_reward, episode_length=episode_length)
        return True
    rec.flush()
    try:
        row = rec.lake.episode(episode_id)
    except NotFound:
        log.warning("update_episode_result: episode %s of task %r is not in the lake %s",
                    episode_id, task_name, rec.lake.path)
        return False
    row.update(status="finished", success=score > 0, eval_score=score, eval_reason=eval_reason or "",
               episode_reward=float(episode_reward) if episode_reward is not None else None,
               episode_length=int(episode_length) if episode_length is not None else None,
               finished_at=now())
    rec.writer.append("episodes", row)
    return True


# -- reading reference folders ----------------------------------------------------------------
@dataclass
class ImportReport:
    episodes: int = 0
    steps: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    missing_images: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"imported {self.episodes} episode(s), {self.steps} step(s)"]
        if self.missing_images:
            lines.append(f"{len(self.missing_images)} step(s) kept without a screenshot (flagged in info):")
            lines += [f"  {p}: {why}" for p, why in self.missing_images[:20]]
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)}:")
            lines += [f"  {p}: {why}" for p, why in self.skipped]
        return "\n".join(lines)


def episode_files(root: Path) -> list[Path]:
    if not root.is_dir():
        raise InvalidInput(f"{root} is not a folder of ClawGUI episodes")
    return sorted(root.glob(f"*/*/{EPISODE_FILE}"))


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value.astimezone(UTC) if value.tzinfo else value.astimezone().astimezone(UTC)


def _load_episode(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"not UTF-8 ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"broken JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("meta_data"), dict):
        raise InvalidInput("no meta_data object")
    if not isinstance(doc.get("episode", []), list):
        raise InvalidInput("'episode' is not a list of steps")
    return doc


def _image_bytes(folder: Path, record: dict) -> tuple[bytes | None, str | None]:
    """The step's image bytes, or (None, why).

    The reference writes absolute paths; a folder that moved since is found through the same
    file name under images/ beside the JSON. Only image files are read (by suffix here, by
    content when the step row is built), so a crafted path cannot pull other files in.
    """
    if not record.get("image_path"):
        return None, "image_path is null in episode.json"
    original = Path(str(record["image_path"]))
    if original.suffix.lower() not in IMAGE_SUFFIXES:
        return None, f"image_path is not an image file: {original}"
    candidates = [original, folder / IMAGE_DIR / original.name]
    for path in candidates:
        try:
            return path.read_bytes(), None
        except OSError:
            continue
    return None, f"image file not found: {record['image_path']}"


def episode_rows(path: Path, report: ImportReport, since_step: int = -1) -> tuple[dict, list[dict]]:
    """The episode row and step rows (steps > since_step) of one episode.json.

    Raises InvalidInput for an episode that cannot be imported at all.
    """
    doc = _load_episode(path)
    meta = doc["meta_data"]
    folder = path.parent
    episode_id = check_id(str(meta.get("episode_id") or folder.name), "meta_data.episode_id")
    steps = []
    for i, record in enumerate(doc.get("episode", [])):
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise InvalidInput(f"episode[{i}] has no integer 'step'")
        if record["step"] <= since_step:
            continue
        image, why = _image_bytes(folder, record)
        info = None
        if image is None:
            report.missing_images.append((f"{path}#step{record['step']}", why))
            info = {"image_missing": why}
        try:
            row = build_step_row(
                episode_id, record["step"], image, record.get("model_response") or "",
                timestamp=_parse_time(record.get("timestamp")), reward=record.get("reward"),
                step_reward=record.get("step_reward"), step_reward_reason=record.get("step_reward_reason"),
                info=info,
            )
        except InvalidInput as exc:
            raise InvalidInput(f"episode[{i}] (step {record['step']}): {exc}") from None
        steps.append(row)
    finished = "eval_score" in meta
    score = meta.get("eval_score")
    episode = {
        "episode_id": episode_id,
        "task_name": meta.get("task_name"),
        "task_goal": meta.get("task_goal"),
        "env": "clawgui-import",
        "created_at": _parse_time(meta.get("created_at")),
        "finished_at": _parse_time(meta.get("finished_at")),
        "status": "finished" if finished else "running",
        "success": bool(meta["success"]) if "success" in meta else (score > 0 if isinstance(score, (int, float)) else None),
        "eval_score": float(score) if isinstance(score, (int, float)) else None,
        "eval_reason": meta.get("eval_reason"),
        "episode_reward": float(meta["episode_reward"]) if isinstance(meta.get("episode_reward"), (int, float)) else None,
        "episode_length": int(meta["episode_length"]) if isinstance(meta.get("episode_length"), int) else len(doc.get("episode", [])),
        "tags": [],
        "extra": json.dumps({"source": str(folder)}),
    }
    return episode, steps


def import_clawgui(lake: Lake, root: Path | str, *, progress: bool = True) -> ImportReport:
    """Import every episode folder under `root`; safe to run again (nothing duplicates)."""
    root = Path(root)
    files = episode_files(root)
    report = ImportReport()
    with LakeWriter(lake.path, WriterOptions(dedupe_steps=True, batch_rows=256)) as writer:
        for path in tqdm(files, desc="import clawgui", unit="episode", disable=not progress):
            try:
                episode, steps = episode_rows(path, report)
            except (InvalidInput, OSError) as exc:
                report.skipped.append((str(path), str(exc)))
                continue
            writer.append("episodes", episode)
            if steps:
                writer.append_rows("steps", steps)
            report.episodes += 1
            report.steps += len(steps)
    lake.invalidate()
    return report


def watch_clawgui(lake: Lake, root: Path | str, *, interval_s: float = 2.0, once: bool = False,
                  stop: threading.Event | None = None) -> ImportReport:
    """Follow a live training's episode folder and ingest steps as they appear.

    The reference rewrites episode.json in place, so a read can catch a half-written file:
    such a file is retried on the next poll rather than reported.
    """
    root = Path(root)
    seen: dict[Path, tuple[float, int]] = {}  # path -> (mtime, last step ingested)
    report = ImportReport()
    stop = stop or threading.Event()
    with LakeWriter(lake.path, WriterOptions(dedupe_steps=True, max_age_s=interval_s)) as writer:
        while True:
            for path in episode_files(root):
                try:
                    mtime = path.stat().st_mtime
                except FileNotFoundError:
                    continue
                last_mtime, last_step = seen.get(path, (-1.0, -1))
                if mtime == last_mtime:
                    continue
                try:
                    episode, steps = episode_rows(path, report, since_step=last_step)
                except InvalidInput as exc:
                    log.debug("watch: %s not readable yet (%s)", path, exc)
                    continue
                writer.append("episodes", episode)
                if steps:
                    writer.append_rows("steps", steps)
                    report.steps += len(steps)
                if path not in seen:
                    report.episodes += 1
                seen[path] = (mtime, max([last_step] + [s["step"] for s in steps]))
            writer.flush()
            if once or stop.wait(interval_s):
                break
    lake.invalidate()
    return report


# -- writing reference folders ---------------------------------------------------------------
def _iso_local(value: datetime | None) -> str | None:
    return value.astimezone().replace(tzinfo=None).isoformat() if value else None


def export_clawgui(lake: Lake, out: Path | str, *, where: str | None = None,
                   progress: bool = True) -> int:
    """Write episodes (optionally filtered by a SQL WHERE over `episodes`) as reference folders.

    Images are written as stored; image paths are absolute, as the reference writes them.
    Returns the number of episodes written.
    """
    out = Path(out).resolve()
    query = "SELECT * FROM episodes" + (f" WHERE {where}" if where else "") + " ORDER BY created_at, episode_id"
    try:
        episodes = lake.sql(query).to_pylist()
    except LakeError:
        raise
    except Exception as exc:  # a user's WHERE that DuckDB rejects
        raise InvalidInput(f"--where: {exc}") from None
    for ep in tqdm(episodes, desc="export clawgui", unit="episode", disable=not progress):
        folder = out / task_dir_name(ep["task_name"]) / ep["episode_id"]
        (folder / IMAGE_DIR).mkdir(parents=True, exist_ok=True)
        images = dict(lake.images(ep["episode_id"]))
        records = []
        for s in lake.steps(ep["episode_id"]).to_pylist():
            image_path = None
            data = images.get(s["step"])
            if data is not None:
                ext = {"jpeg": "jpg"}.get(s["image_format"], s["image_format"] or "png")
                image_file = folder / IMAGE_DIR / f"step_{s['step']:04d}.{ext}"
                image_file.write_bytes(data)
                image_path = str(image_file)
            record = {"step": s["step"], "image_path": image_path, "model_response": s["model_response"],
                      "timestamp": _iso_local(s["timestamp"])}
            if s["step_reward"] is not None:
                record["step_reward"] = s["step_reward"]
                record["step_reward_reason"] = s["step_reward_reason"] or ""
            records.append(record)
        meta = {"task_name": ep["task_name"], "task_goal": ep["task_goal"], "episode_id": ep["episode_id"],
                "created_at": _iso_local(ep["created_at"])}
        if ep["status"] != "running":
            meta.update(success=bool(ep["success"]), eval_score=ep["eval_score"] or 0.0,
                        eval_reason=ep["eval_reason"] or "", episode_reward=ep["episode_reward"] or 0.0,
                        episode_length=ep["episode_length"] or len(records),
                        finished_at=_iso_local(ep["finished_at"]))
        tmp = folder / (EPISODE_FILE + ".tmp")
        tmp.write_text(json.dumps({"meta_data": meta, "episode": records}, ensure_ascii=False, indent=2))
        tmp.replace(folder / EPISODE_FILE)
    return len(episodes)
