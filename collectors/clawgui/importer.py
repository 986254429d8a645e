"""ClawGUI-RL episode folders into the lake: `elake import clawgui` (once) and `elake watch
clawgui` (following a folder that a training run is writing).

Folders (FORMATS.md section 1; the layout and its writer are in
:mod:`episodelake.lake.export.clawgui`): import is idempotent (keys), tolerant of moved
folders (absolute image paths that no longer exist are looked up beside the JSON), and
reports what it skipped. Episode groups, which the folders do not store, are derived by
:class:`GroupDeriver`, as the drop-in functions (:mod:`.dropin`) derive them.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import math
import os
import re
import stat
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from episodelake.collectors.record.recorder import build_step_row
from episodelake.lake import Lake, WriterOptions
from episodelake.lake.derive.anchor import AnchorKeyer as DefaultKeyer
from episodelake.lake.export.clawgui import EPISODE_FILE, IMAGE_DIR, IMAGE_SUFFIXES
from episodelake.lake.ops.jobs import Job
from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.layout import check_id
from episodelake.lake.storage.writer import LakeWriter

log = logging.getLogger(__name__)

#: Largest episode.json read: the reference's files are tens of kilobytes; this bounds memory.
MAX_EPISODE_FILE_BYTES = 64 * 1024 * 1024
#: Largest screenshot file read (the recorder's pixel limit refuses larger images anyway).
MAX_IMAGE_FILE_BYTES = 256 * 1024 * 1024
INT32_MAX = 2**31 - 1

#: How imported episodes get their GiGPO/GRPO episode group (the reference does not store it).
GROUP_BY = ("task-window", "task", "none")
#: Rollouts of one task in one reference batch start within seconds of each other (all
#: environments take step 0 together); the next batch of the same task comes a whole
#: rollout-and-update later. A gap of 10 minutes separates the two for any realistic batch.
DEFAULT_GROUP_WINDOW_MIN = 10.0
#: Overrides the window of the drop-in functions (minutes), which take no extra arguments.
GROUP_WINDOW_ENV = "ELAKE_CLAWGUI_WINDOW_MIN"


@dataclass
class ImportReport:
    episodes: int = 0
    steps: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (episode.json, why)
    missing_images: list[tuple[str, str]] = field(default_factory=list)  # (episode.json#stepN, why)
    ungrouped: list[tuple[str, str]] = field(default_factory=list)  # (episode.json, why)

    def summary(self) -> str:
        lines = [f"imported {self.episodes} episode(s), {self.steps} step(s)"]
        if self.missing_images:
            lines.append(f"{len(self.missing_images)} step(s) kept without a screenshot (flagged in info):")
            lines += [f"  {p}: {why}" for p, why in self.missing_images[:20]]
            if len(self.missing_images) > 20:
                lines.append(f"  ... and {len(self.missing_images) - 20} more")
        if self.ungrouped:
            lines.append(f"{len(self.ungrouped)} episode(s) without a group id (the trainer leaves them out):")
            lines += [f"  {p}: {why}" for p, why in self.ungrouped[:20]]
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)}:")
            lines += [f"  {p}: {why}" for p, why in self.skipped]
        return "\n".join(lines)


class _FileMissing(InvalidInput):
    """The file is not there (as opposed to refused)."""


class ImportRoot:
    """The folder being imported, and the only place an import reads files from.

    Every path a folder names (the episode file, `image_path`, and any symlink on the way) is
    resolved against the episode folder and then through the filesystem; a file that lands
    outside the root is refused, so a crafted or careless folder cannot pull other files of
    the machine into the lake (and from there into exports and the web app).
    """

    def __init__(self, root: Path | str):
        self.path = Path(os.path.abspath(root))
        if not self.path.is_dir():
            raise InvalidInput(f"{root} is not a folder of ClawGUI episodes")
        self.real = Path(os.path.realpath(self.path))

    def episode_files(self) -> list[Path]:
        return sorted(self.path.glob(f"*/*/{EPISODE_FILE}"))

    def contains(self, real: Path) -> bool:
        return real == self.real or self.real in real.parents

    def read(self, path: Path, limit: int) -> bytes:
        """The bytes of a regular file inside the root; InvalidInput says why not."""
        real = Path(os.path.realpath(path))
        if not self.contains(real):
            raise InvalidInput(f"{path} resolves outside the import root")
        try:
            # O_NOFOLLOW: the last component cannot be swapped for a link after the check;
            # O_NONBLOCK: a FIFO planted in the folder does not hang the import.
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise _FileMissing(f"{path} not found") from None
        except OSError as exc:
            raise InvalidInput(f"{path} cannot be read ({exc.strerror})") from None
        with os.fdopen(fd, "rb") as handle:
            try:
                info = os.fstat(handle.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise InvalidInput(f"{path} is not a regular file")
                data = handle.read(limit + 1)
            except OSError as exc:
                raise InvalidInput(f"{path} cannot be read ({exc.strerror})") from None
            if max(info.st_size, len(data)) > limit:
                raise InvalidInput(f"{path} is over the {limit:,}-byte limit")
            return data


def episode_files(root: Path | str) -> list[Path]:
    return ImportRoot(root).episode_files()


# Field checks: every value the importer reads is checked for type and for the range of its
# lake column, so a bad file becomes one skipped episode with a reason, never an exception.
def _type(value: object) -> str:
    return f"the string {value!r}" if isinstance(value, str) else type(value).__name__


def _opt_text(value: object, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name}: expected text, not {_type(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{name}: not valid UTF-8 (a lone surrogate escape)") from None
    return value


def _opt_number(value: object, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name}: expected a number, not {_type(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidInput(f"{name}: {str(value)[:20]}... is too large for a float") from None
    if not math.isfinite(number):
        raise InvalidInput(f"{name}: must be a finite number, not {number}")
    return number


def _opt_int32(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name}: expected an integer, not {_type(value)}")
    if not 0 <= value <= INT32_MAX:
        raise InvalidInput(f"{name}: {str(value)[:24]} is outside 0..{INT32_MAX}")
    return value


def _opt_bool(value: object, name: str) -> bool | None:
    """JSON true/false only: the strings "true"/"false" and the numbers 0/1 are refused, not
    guessed (Python's bool("false") is True, which is how a result gets inverted)."""
    if value is None or isinstance(value, bool):
        return value
    raise InvalidInput(f"{name}: expected true or false (a JSON boolean), not {_type(value)}")


def _opt_time(value: object, name: str) -> datetime | None:
    """An ISO-8601 time; the reference writes local time without a zone."""
    text = _opt_text(value, name)
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
        return parsed.astimezone(UTC) if parsed.tzinfo else parsed.astimezone().astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        raise InvalidInput(f"{name}: {text[:40]!r} is not an ISO-8601 time") from None


@dataclass
class ParsedEpisode:
    """One episode.json, every field checked; images are read later, step by step."""

    path: Path
    row: dict  # the `episodes` row, group_id not yet decided
    records: list[dict]  # per step: step, image_path, model_response, timestamp, rewards
    group_id: str | None  # carried by the folder (the lake's own exports write it)
    started: datetime | None  # created_at, else the first step's timestamp


def parse_episode(root: ImportRoot, path: Path) -> ParsedEpisode:
    """Read and check one episode.json; InvalidInput names the field that stops the import."""
    raw = root.read(path, MAX_EPISODE_FILE_BYTES)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"not UTF-8 ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"broken JSON ({exc.msg} at line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:  # integers over 4,300 digits, deep nesting
        raise InvalidInput(f"unreadable JSON ({str(exc)[:80] or type(exc).__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("meta_data"), dict):
        raise InvalidInput("meta_data: missing or not an object")
    steps = doc.get("episode", [])
    if steps is None:
        steps = []
    if not isinstance(steps, list):
        raise InvalidInput("'episode' is not a list of steps")
    meta = doc["meta_data"]
    folder = path.parent
    episode_id = meta.get("episode_id")
    if episode_id is None or episode_id == "":
        episode_id = check_id(folder.name, "episode folder name (meta_data.episode_id is empty)")
    elif not isinstance(episode_id, str):
        raise InvalidInput(f"meta_data.episode_id: expected text, not {_type(episode_id)}")
    else:
        episode_id = check_id(episode_id, "meta_data.episode_id")
    group_id = meta.get("group_id")
    if group_id is not None:
        group_id = check_id(group_id, "meta_data.group_id")

    records: list[dict[str, Any]] = []
    seen = set()
    for i, record in enumerate(steps):
        name = f"episode[{i}]"
        if not isinstance(record, dict):
            raise InvalidInput(f"{name}: expected a step object, not {_type(record)}")
        if record.get("step") is None:
            raise InvalidInput(f"{name}.step: missing")
        number = _opt_int32(record["step"], f"{name}.step")
        if number in seen:
            raise InvalidInput(f"{name}.step: step {number} appears twice")
        seen.add(number)
        records.append({
            "step": number,
            "image_path": record.get("image_path"),  # checked when the image is read
            "model_response": _opt_text(record.get("model_response"), f"{name}.model_response") or "",
            "timestamp": _opt_time(record.get("timestamp"), f"{name}.timestamp"),
            "reward": _opt_number(record.get("reward"), f"{name}.reward"),
            "step_reward": _opt_number(record.get("step_reward"), f"{name}.step_reward"),
            "step_reward_reason": _opt_text(record.get("step_reward_reason"), f"{name}.step_reward_reason"),
        })

    score = _opt_number(meta.get("eval_score"), "meta_data.eval_score")
    success = _opt_bool(meta.get("success"), "meta_data.success")
    if success is None and score is not None:
        success = score > 0  # what the reference's update_episode_result writes
    length = _opt_int32(meta.get("episode_length"), "meta_data.episode_length")
    created = _opt_time(meta.get("created_at"), "meta_data.created_at")
    finished = any(meta.get(k) is not None for k in ("eval_score", "success", "finished_at"))
    row: dict[str, Any] = {
        "episode_id": episode_id,
        "task_name": _opt_text(meta.get("task_name"), "meta_data.task_name"),
        "task_goal": _opt_text(meta.get("task_goal"), "meta_data.task_goal"),
        "env": "clawgui-import",
        "created_at": created,
        "finished_at": _opt_time(meta.get("finished_at"), "meta_data.finished_at"),
        "status": "finished" if finished else "running",
        "success": success,
        "eval_score": score,
        "eval_reason": _opt_text(meta.get("eval_reason"), "meta_data.eval_reason"),
        "episode_reward": _opt_number(meta.get("episode_reward"), "meta_data.episode_reward"),
        "episode_length": len(records) if length is None else length,
        "tags": [],
    }
    first_time = min((r["timestamp"] for r in records if r["timestamp"] is not None), default=None)
    return ParsedEpisode(path, row, records, group_id, created or first_time)


def _image(root: ImportRoot, folder: Path, value: object) -> tuple[bytes | None, str | None]:
    """A step's screenshot bytes, or (None, why).

    `image_path` is resolved against the episode folder (the reference writes absolute
    paths; a relative one is relative to the folder, never to the working directory). A
    folder that moved keeps its screenshots at images/<name> beside the JSON, which is where
    an absolute path that is gone, or that points outside the root, is looked up instead.
    """
    if value is None:
        return None, "image_path is null in episode.json"
    if not isinstance(value, str) or not value or "\x00" in value:
        return None, f"image_path is not a file path ({_type(value)})"
    given = Path(value)
    if given.suffix.lower() not in IMAGE_SUFFIXES:
        return None, f"image_path is not an image file: {value}"
    refused = []
    for candidate in dict.fromkeys([folder / given, folder / IMAGE_DIR / given.name]):
        try:
            return root.read(candidate, MAX_IMAGE_FILE_BYTES), None
        except _FileMissing:
            continue
        except InvalidInput as exc:  # outside the root, not a regular file, too large
            refused.append(str(exc))
    if refused:
        return None, f"image_path {value}: {refused[0]}"
    return None, f"image file not found: {value} (nor images/{given.name} beside episode.json)"


def step_rows(root: ImportRoot, parsed: ParsedEpisode, report: ImportReport, *, group_id: str | None,
              anchor: DefaultKeyer | None, since_step: int = -1) -> list[dict]:
    """The `steps` rows of an episode (steps > since_step), anchor-keyed within its group.

    A screenshot that is missing, refused or damaged leaves its step in place, flagged in
    `info` and reported, never replaced by a stand-in image.
    """
    rows = []
    for record in parsed.records:
        if record["step"] <= since_step:
            continue
        image, why = _image(root, parsed.path.parent, record["image_path"])
        fields = dict(timestamp=record["timestamp"], reward=record["reward"], step_reward=record["step_reward"],
                      step_reward_reason=record["step_reward_reason"], group_id=group_id, anchor=anchor)
        row = None
        if image is not None:
            try:
                row = build_step_row(parsed.row["episode_id"], record["step"], image, record["model_response"],
                                     **fields)
            except InvalidInput as exc:  # every other field is checked already: the image is bad
                why = str(exc)
        if row is None:
            assert why is not None  # no image comes with its reason, a refused one with the error
            report.missing_images.append((f"{parsed.path}#step{record['step']}", why))
            try:
                row = build_step_row(parsed.row["episode_id"], record["step"], None, record["model_response"],
                                     info={"image_missing": why}, **fields)
            except InvalidInput as exc:
                raise InvalidInput(f"episode step {record['step']}: {exc}") from None
        rows.append(row)
    return rows


def _group_slug(task_name: str | None) -> str:
    """A task name as the start of a group id (ids allow only letters, digits and ._:@+=-);
    names that had to change get a short hash so two tasks never share a slug."""
    name = task_name or "unknown_task"
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_-")[:80] or "task"
    if slug != name:
        slug += "+" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return slug


class GroupDeriver:
    """Episode group ids for ClawGUI episodes, which do not store theirs.

    - ``task-window`` (default): episodes of one task whose creation times lie within
      ``window_min`` minutes of a neighbour (by created_at, else the first step's timestamp)
      form one group: the rollouts of one training batch. The id is the task and the first
      episode's creation time (UTC), e.g. ``wifi_on@20261130T100000.000001Z``, so importing
      the same folder again gives the same ids.
    - ``task``: one group per task (GRPO over every rollout of a task, whatever the batch).
    - ``none``: no group id; the trainer leaves such episodes out.

    A group id the folder carries itself (``meta_data.group_id``, written by the lake's own
    export) is kept, except with ``none``.
    """

    def __init__(self, group_by: str = "task-window", window_min: float = DEFAULT_GROUP_WINDOW_MIN):
        if group_by not in GROUP_BY:
            raise InvalidInput(f"group_by: {group_by!r} is not one of {', '.join(GROUP_BY)}")
        if isinstance(window_min, bool) or not isinstance(window_min, (int, float)) \
                or not math.isfinite(window_min) or window_min <= 0:
            raise InvalidInput(f"window_min: must be a positive number of minutes, not {window_min!r}")
        self.group_by = group_by
        self.window = timedelta(minutes=window_min)
        self._seen: dict[str, list[tuple[datetime, str]]] = {}  # slug -> sorted (time, group id)
        self._lock = threading.Lock()

    def describe(self) -> str:
        minutes = self.window.total_seconds() / 60
        return f"task-window:{minutes:g}min" if self.group_by == "task-window" else self.group_by

    def assign(self, task_name: str | None, started: datetime | None,
               carried: str | None = None) -> tuple[str | None, str | None]:
        """(group id, None), or (None, why there is none)."""
        if self.group_by == "none":
            return None, None
        if carried is not None:
            return carried, None
        slug = _group_slug(task_name)
        if self.group_by == "task":
            return check_id(slug, "group_id"), None
        if started is None:
            return None, "no created_at and no step timestamp to place it in a batch"
        with self._lock:
            seen = self._seen.setdefault(slug, [])
            at = bisect.bisect_left(seen, (started, ""))
            near = [seen[i] for i in (at - 1, at) if 0 <= i < len(seen)]
            gaps = [(abs(t - started), gid) for t, gid in near if abs(t - started) <= self.window]
            if gaps:
                gid = min(gaps)[1]
            else:
                stamp = started.astimezone(UTC).strftime("%Y%m%dT%H%M%S")
                gid = f"{slug}@{stamp}{f'.{started.microsecond:06d}' if started.microsecond else ''}Z"
            seen.insert(at, (started, check_id(gid, "group_id")))
            return gid, None


def _fits(table: str, rows: list[dict]) -> None:
    """Refuse rows the lake's schema cannot hold before anything is appended, so an episode
    never lands without its steps."""
    try:
        schema.conform(table, rows)
    except InvalidInput:  # conform's own, naming the column (an InvalidInput is a ValueError)
        raise
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
        raise InvalidInput(f"does not fit the {table} table ({str(exc)[:200]})") from None


def _rows(root: ImportRoot, parsed: ParsedEpisode, group_id: str | None, deriver: GroupDeriver,
          report: ImportReport, anchor: DefaultKeyer, since_step: int = -1) -> tuple[dict, list[dict]]:
    episode = {**parsed.row, "group_id": group_id,
               "extra": json.dumps({"source": str(parsed.path.parent), "group_by": deriver.describe()})}
    steps = step_rows(root, parsed, report, group_id=group_id, anchor=anchor, since_step=since_step)
    _fits("episodes", [episode])
    _fits("steps", steps)
    return episode, steps


def _group(deriver: GroupDeriver, parsed: ParsedEpisode, report: ImportReport) -> str | None:
    group_id, why = deriver.assign(parsed.row["task_name"], parsed.started, parsed.group_id)
    if why:
        report.ungrouped.append((str(parsed.path), why))
    return group_id


def import_clawgui(lake: Lake, root: Path | str, *, group_by: str = "task-window",
                   window_min: float = DEFAULT_GROUP_WINDOW_MIN, progress: bool = True,
                   job: Job | None = None) -> ImportReport:
    """Import every episode folder under `root`; safe to run again (nothing duplicates).

    An episode that cannot be imported is skipped with its reason and the import goes on.
    Group ids are derived as :class:`GroupDeriver` says; steps get anchor keys within them.
    Two passes: the first reads every episode.json (no images) to place episodes in their
    batch in creation order, the second reads the screenshots and writes. Recorded as `job`
    (by default a new job of kind ``import``), with its progress in episodes and its counts.
    """
    job = job or Job(lake, "import", params={"format": "clawgui", "dir": str(Path(root).resolve()), "group_by": group_by,
                                             "window_min": window_min})
    with job.recording():
        report = _import(lake, root, group_by, window_min, progress, job)
        job.result = {"episodes": report.episodes, "steps": report.steps, "skipped": len(report.skipped),
                      "missing_images": len(report.missing_images), "ungrouped": len(report.ungrouped)}
    return report


def _import(lake: Lake, root: Path | str, group_by: str, window_min: float, progress: bool,
            job: Job) -> ImportReport:
    deriver = GroupDeriver(group_by, window_min)
    import_root = ImportRoot(root)
    report = ImportReport()
    headers = []
    for path in import_root.episode_files():
        try:
            parsed = parse_episode(import_root, path)
        except InvalidInput as exc:
            report.skipped.append((str(path), str(exc)))
            continue
        parsed.records = []  # the first pass keeps only what places the episode in a group
        headers.append(parsed)
    groups = {}
    for parsed in sorted(headers, key=lambda p: (p.started is None, p.started or datetime.min, str(p.path))):
        groups[parsed.path] = _group(deriver, parsed, report)
    anchor = DefaultKeyer()
    job.progress(0, len(groups))
    with LakeWriter(lake.path, WriterOptions(dedupe_steps=True, batch_rows=256)) as writer:
        for done, path in enumerate(tqdm(sorted(groups), desc="import clawgui", unit="episode",
                                         disable=not progress), 1):
            try:  # read again: the file may have changed since the first pass
                episode, steps = _rows(import_root, parse_episode(import_root, path), groups[path],
                                       deriver, report, anchor)
            except InvalidInput as exc:
                report.skipped.append((str(path), str(exc)))
            else:
                writer.append("episodes", episode)
                if steps:
                    writer.append_rows("steps", steps)
                report.episodes += 1
                report.steps += len(steps)
            job.progress(done, len(groups))
    lake.invalidate()
    return report


def watch_clawgui(lake: Lake, root: Path | str, *, interval_s: float = 2.0, once: bool = False,
                  stop: threading.Event | None = None, group_by: str = "task-window",
                  window_min: float = DEFAULT_GROUP_WINDOW_MIN) -> ImportReport:
    """Follow a live training's episode folder and ingest steps as they appear.

    The reference rewrites episode.json in place, so a read can catch a half-written file:
    such a file is read again once it changes. Episodes are placed in groups as they appear
    (in creation order within each poll), which gives the ids a later import of the whole
    folder gives, as long as a training writes its episodes in creation order.
    """
    deriver = GroupDeriver(group_by, window_min)
    import_root = ImportRoot(root)
    seen: dict[Path, tuple[float, int]] = {}  # path -> (mtime, last step ingested)
    groups: dict[Path, str | None] = {}  # placed once, when an episode is first read whole
    groups_counted: set[Path] = set()
    report = ImportReport()
    stop = stop or threading.Event()
    anchor = DefaultKeyer()
    with LakeWriter(lake.path, WriterOptions(dedupe_steps=True, max_age_s=interval_s)) as writer:
        while True:
            changed = []
            for path in import_root.episode_files():
                try:
                    mtime = path.stat().st_mtime
                except OSError:
                    continue
                last_mtime, last_step = seen.get(path, (-1.0, -1))
                if mtime == last_mtime:
                    continue
                try:
                    parsed = parse_episode(import_root, path)
                except InvalidInput as exc:
                    log.debug("watch: %s not readable (%s); read again when it changes", path, exc)
                    seen[path] = (mtime, last_step)
                    continue
                changed.append((parsed.started or datetime.max.replace(tzinfo=UTC), str(path), parsed, mtime))
            for _, _, parsed, mtime in sorted(changed, key=lambda c: c[:2]):
                path = parsed.path
                last_step = seen.get(path, (-1.0, -1))[1]
                if path not in groups:
                    groups[path] = _group(deriver, parsed, report)
                try:
                    episode, steps = _rows(import_root, parsed, groups[path], deriver, report, anchor,
                                           since_step=last_step)
                except InvalidInput as exc:
                    log.warning("watch: skipping %s: %s", path, exc)
                    seen[path] = (mtime, last_step)
                    continue
                writer.append("episodes", episode)
                if steps:
                    writer.append_rows("steps", steps)
                    report.steps += len(steps)
                if path not in groups_counted:
                    groups_counted.add(path)
                    report.episodes += 1
                seen[path] = (mtime, max([last_step] + [s["step"] for s in steps]))
            writer.flush()
            if once or stop.wait(interval_s):
                break
    lake.invalidate()
    return report
