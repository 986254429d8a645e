"""Task lists for batches: task files (`elake collect --tasks FILE`) and episode groups."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from episodelake.collectors.envs.base import Task
from episodelake.lake.storage.errors import InvalidInput


def load_tasks(path: Path | str, *, repeat: int = 1, run_id: str = "run") -> list[Task]:
    """Tasks from a file: one task a line, either plain text (a task name for devices with a
    task registry, the goal itself for a phone) or a JSON object with ``name`` and/or ``goal``
    and optionally ``repeat`` (episodes of that task, one group). Blank and # lines skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidInput(f"cannot read task file {path}: {exc}") from None
    entries: list[tuple[str, str | None, int]] = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if not text.startswith("{"):
            entries.append((text, None, repeat))
            continue
        try:
            item = json.loads(text)
            name = item.get("name") or item.get("goal")
            times = int(item.get("repeat", repeat))
        except (ValueError, AttributeError, TypeError) as exc:
            raise InvalidInput(f"{path}:{number}: not a task line ({exc}); write a task name, a "
                               'goal, or {"name": ..., "goal": ..., "repeat": N}') from None
        if not isinstance(name, str) or not name.strip() or times < 1:
            raise InvalidInput(f"{path}:{number}: a task needs a non-empty name or goal and "
                               "repeat >= 1")
        entries.append((name, item.get("goal"), times))
    if not entries:
        raise InvalidInput(f"task file {path} holds no task")
    return grouped_tasks(entries, run_id)


def grouped_tasks(entries: Iterable[tuple[str, str | None, int]], run_id: str) -> list[Task]:
    """One Task per episode: each entry (name, goal, repeat) repeated, its episodes sharing a
    group id (the GRPO/GiGPO episode group)."""
    tasks: list[Task] = []
    for index, (name, goal, times) in enumerate(entries):
        group = f"{run_id}.g{index}" if times > 1 else None
        tasks += [Task(name, goal, group)] * times
    return tasks
