"""The ClawGUI-RL episode-folder layout, one reference `save_dir` per split.

``OUT/train/<task>/<episode_id>/episode.json`` + ``images/step_NNNN.png`` (and ``OUT/val/...``),
written by :func:`export_clawgui`, exactly as the reference's own tools read them: whole
episodes with every step, image paths absolute as the reference writes them (so the folder
is meant to be read where it was written; `elake import clawgui` also finds the images of a
moved folder beside each episode.json). A step whose screenshot
is lost keeps the path its PNG would have, with no file there (the reference viewer shows
the step without an image; a null path would fail the whole episode); `step_reward` and
`step_reward_reason` are left out when empty, as the reference does; `meta_data.group_id`
carries the episode group back into a re-import. An episode is exported when at least one
of its samples was kept; history options do not apply.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from tqdm import tqdm

from episodelake.lake.export.base import SPLITS, ExportFormat, WriteContext
from episodelake.lake.export.samples import Sample
from episodelake.lake.storage.lake import Lake

#: The folder layout, shared with the importer (:mod:`episodelake.collectors.clawgui.importer`).
EPISODE_FILE = "episode.json"
IMAGE_DIR = "images"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


def task_dir_name(task_name: str | None) -> str:
    """The reference's folder name for a task: spaces and '/' become '_'."""
    if not task_name:
        return "unknown_task"
    return task_name.replace(" ", "_").replace("/", "_")


def _iso_local(value: datetime | None) -> str | None:
    return value.astimezone().replace(tzinfo=None).isoformat() if value else None


def export_clawgui(lake: Lake, out: Path | str, *, where: str | None = None,
                   episode_ids: list[str] | None = None, progress: bool = True) -> int:
    """Write episodes as reference folders: every one, those meeting `where` (a caller's SQL
    condition over `episodes`, checked and run in the sandbox), or `episode_ids` (ours).

    Images are written as stored; image paths are absolute, as the reference writes them. A
    step whose screenshot is lost gets the path its PNG would have, with no file there: the
    reference viewer then shows the step without an image (a null path makes it fail the
    whole episode). Optional keys (`step_reward`, `step_reward_reason`) are left out when
    there is no value, as the reference does; `meta_data.group_id` is added when the episode
    has one, so a re-import keeps its group. Returns the number of episodes written.
    """
    out = Path(out).resolve()
    order = " ORDER BY created_at, episode_id"
    chosen = episode_ids
    if where is not None:
        chosen = lake.matching("SELECT episode_id FROM episodes", where)["episode_id"].to_pylist()
    if chosen is None:
        episodes = lake.sql("SELECT * FROM episodes" + order).to_pylist()
    else:
        episodes = lake.sql("SELECT * FROM episodes WHERE list_contains(?, episode_id)" + order, [chosen]).to_pylist()
    for ep in tqdm(episodes, desc="export clawgui", unit="episode", disable=not progress):
        folder = out / task_dir_name(ep["task_name"]) / ep["episode_id"]
        (folder / IMAGE_DIR).mkdir(parents=True, exist_ok=True)
        images = dict(lake.images(ep["episode_id"]))
        records = []
        for s in lake.steps(ep["episode_id"]).to_pylist():
            data = images.get(s["step"])
            ext = {"jpeg": "jpg"}.get(s["image_format"], s["image_format"] or "png") if data is not None else "png"
            image_file = folder / IMAGE_DIR / f"step_{s['step']:04d}.{ext}"
            for stale in (folder / IMAGE_DIR).glob(f"step_{s['step']:04d}.*"):
                if stale != image_file or data is None:  # an earlier export's file must not answer
                    stale.unlink()
            if data is not None:
                image_file.write_bytes(data)
            record = {"step": s["step"], "image_path": str(image_file), "model_response": s["model_response"],
                      "timestamp": _iso_local(s["timestamp"])}
            if s["step_reward"] is not None:
                record["step_reward"] = s["step_reward"]
            if s["step_reward_reason"] is not None:
                record["step_reward_reason"] = s["step_reward_reason"]
            records.append(record)
        meta = {"task_name": ep["task_name"], "task_goal": ep["task_goal"], "episode_id": ep["episode_id"],
                "created_at": _iso_local(ep["created_at"])}
        if ep["group_id"] is not None:
            meta["group_id"] = ep["group_id"]
        if ep["status"] != "running":
            meta.update(success=bool(ep["success"]), eval_score=ep["eval_score"] or 0.0,
                        eval_reason=ep["eval_reason"] or "", episode_reward=ep["episode_reward"] or 0.0,
                        episode_length=ep["episode_length"] or len(records),
                        finished_at=_iso_local(ep["finished_at"]))
        tmp = folder / (EPISODE_FILE + ".tmp")
        tmp.write_text(json.dumps({"meta_data": meta, "episode": records}, ensure_ascii=False, indent=2))
        tmp.replace(folder / EPISODE_FILE)
    return len(episodes)


class ClawguiWriter:
    def __init__(self, ctx: WriteContext):
        self.ctx = ctx
        self._episodes: dict[str, list[str]] = {}
        self._written: dict[str, int] = {}

    def write(self, split: str, sample: Sample) -> None:
        ids = self._episodes.setdefault(split, [])
        if not ids or ids[-1] != sample.episode_id:
            ids.append(sample.episode_id)

    def close(self) -> list[str]:
        written = []
        for split in SPLITS:
            ids = self._episodes.get(split)
            if not ids:
                continue
            self._written[split] = export_clawgui(self.ctx.source, self.ctx.out / split, episode_ids=ids,
                                                  progress=False)
            written.append(split)
        return written

    def records(self) -> dict[str, int]:
        """Episode folders per split (each holds every step of its episode)."""
        return {split: self._written.get(split, 0) for split in SPLITS}


FORMAT = ExportFormat(
    name="clawgui",
    summary="ClawGUI-RL episode folders (episode.json + images/step_NNNN.png), one per split",
    doc=__doc__,
    open=ClawguiWriter,
    redacts=False,  # whole episodes as stored: screenshots, goals and responses unmasked
    unit="episodes",
)
