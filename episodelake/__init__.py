"""EpisodeLake: every step of a GUI agent's episodes as a row of a versioned lake.

The names users call, from one import::

    from episodelake import Recorder, Lake, sft_dataset

Each name lives in its own room (``Recorder`` in ``episodelake.collectors.record.recorder``,
``Lake`` in ``episodelake.lake.storage.lake``, ``sft_dataset`` in ``episodelake.trainer.data``
...); this module only points at them. The names load on first use, so ``import
episodelake.lake`` costs no torch and a recorder never imports the trainer. The ClawGUI-RL
drop-in keeps its own one-line import (``from episodelake.collectors.clawgui import
save_episode_to_json, update_episode_result``), the names ClawGUI code already calls.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module that defines it; the one list of the public names (docs/api.md documents
# each, and tests/test_public_api.py checks both agree)
HOMES: dict[str, str] = {
    "Recorder": "episodelake.collectors.record.recorder",
    "Lake": "episodelake.lake.storage.lake",
    "sft_dataset": "episodelake.trainer.data",
    "ExportSpec": "episodelake.lake.export.spec",
    "collect_one": "episodelake.collectors.loop",
    "Task": "episodelake.collectors.envs.base",
    "ParsedAction": "episodelake.lake.vocab.families.base",
    "EpisodeLakeError": "episodelake.lake.storage.errors",
    "InvalidInput": "episodelake.lake.storage.errors",
    "NotFound": "episodelake.lake.storage.errors",
    "Conflict": "episodelake.lake.storage.errors",
    "LakeError": "episodelake.lake.storage.errors",
    "StoreUnavailable": "episodelake.lake.storage.store",
    "CommitFailed": "episodelake.lake.storage.writer",
    "Backpressure": "episodelake.lake.storage.writer",
}

__all__ = sorted(HOMES)

if TYPE_CHECKING:
    from episodelake.collectors.envs.base import Task
    from episodelake.collectors.loop import collect_one
    from episodelake.collectors.record.recorder import Recorder
    from episodelake.lake.export.spec import ExportSpec
    from episodelake.lake.storage.errors import Conflict, EpisodeLakeError, InvalidInput, LakeError, NotFound
    from episodelake.lake.storage.lake import Lake
    from episodelake.lake.storage.store import StoreUnavailable
    from episodelake.lake.storage.writer import Backpressure, CommitFailed
    from episodelake.lake.vocab.families.base import ParsedAction
    from episodelake.trainer.data import sft_dataset


def __getattr__(name: str) -> Any:
    """Load a public name from its home on first use (PEP 562)."""
    home = HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'episodelake' has no attribute {name!r}; "
                             f"its public names are {', '.join(__all__)}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
