"""Lets the manual's API page read the package as it installs.

setup.py maps the top-level folders onto one package (`lake/` installs as `episodelake.lake`),
which only the running import system knows; a static reader such as griffe (behind
mkdocstrings) looks for `episodelake/lake/` on disk. Before the build this hook lays out that
tree in a temporary folder, as links to the repository's folders, and points the Python
handler at it, so docs/api.md is generated from the source without importing it.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("lake", "collectors", "trainer", "api")


@event_priority(100)  # before mkdocstrings reads its handler options
def on_config(config: Any) -> Any:
    tree = Path(tempfile.mkdtemp(prefix="elake-docs-"))
    atexit.register(shutil.rmtree, tree, ignore_errors=True)
    package = tree / "episodelake"
    package.mkdir()
    for name in ("__init__.py", "py.typed"):
        (package / name).symlink_to(ROOT / "episodelake" / name)
    for folder in FOLDERS:
        (package / folder).symlink_to(ROOT / folder, target_is_directory=True)
    python = config["plugins"]["mkdocstrings"].config["handlers"].setdefault("python", {})
    python["paths"] = [str(tree)]
    return config
