"""Train/validation split by task, and duplicate detection.

A task's split depends only on the seed and the task name (a hash), never on which other
tasks are selected: with the same seed, a task held out in one export is held out in every
export, so validation tasks cannot leak into a later training set.
"""

from __future__ import annotations

from episodelake.lake.vocab.seeds import fraction


def split_of(task: str, seed: int, val_fraction: float) -> str:
    return "val" if fraction(seed, task) < val_fraction else "train"


class Dedup:
    """Remembers sample keys; `seen(key)` is True from the second time a key is offered."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._keys: set[str] = set()

    def seen(self, key: str) -> bool:
        if not self.enabled:
            return False
        if key in self._keys:
            return True
        self._keys.add(key)
        return False
