"""Checkpoints of a training run: one folder per iteration, a `latest` file naming the newest.

```
<checkpoint_dir>/
    latest                  the name of the newest complete checkpoint (written last)
    iter-000004/
        policy/             the policy's files (safetensors weights, its config / HF folder)
        optimizer.pt        the torch engine's optimizer state (or deepspeed/ for DeepSpeed)
        trainer_state.json  the iteration it completes, the run id and the run's config
```
`latest` is replaced atomically after a checkpoint is complete, so a crash while saving
leaves the previous checkpoint in charge; older checkpoints are then deleted.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from episodelake.lake.storage.errors import NotFound

log = logging.getLogger(__name__)

LATEST = "latest"
STATE_FILE = "trainer_state.json"
POLICY_DIR = "policy"
PREFIX = "iter-"


def iteration_folder(root: Path, iteration: int) -> Path:
    return root / f"{PREFIX}{iteration:06d}"


def latest(root: Path) -> Path | None:
    """The newest complete checkpoint under `root`, if any."""
    pointer = root / LATEST
    if not pointer.is_file():
        return None
    folder = root / pointer.read_text(encoding="utf-8").strip()
    if not (folder / STATE_FILE).is_file():
        raise NotFound(f"{pointer} names {folder.name}, which is missing or incomplete; "
                       f"point it at a complete {PREFIX}* folder or delete {root}")
    return folder


def read_state(folder: Path) -> dict[str, Any]:
    return json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))


def commit(root: Path, folder: Path, state: dict[str, Any]) -> None:
    """Mark `folder` (its policy and optimizer already written) as the newest checkpoint."""
    (folder / STATE_FILE).write_text(json.dumps(state, indent=1), encoding="utf-8")
    pointer = root / LATEST
    partial = root / (LATEST + ".partial")
    partial.write_text(folder.name, encoding="utf-8")
    os.replace(partial, pointer)
    for old in root.glob(PREFIX + "*"):
        if old.is_dir() and old != folder:
            shutil.rmtree(old)
            log.debug("removed the older checkpoint %s", old)
