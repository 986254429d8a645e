"""Lets the manual's API page read the package as it installs.

setup.py maps the top-level folders onto one package (`lake/` installs as `episodelake.lake`),
which only the running import system knows; griffe (behind mkdocstrings) reads files and looks
for `episodelake/lake/`. Before the build this hook lays that tree out in a temporary folder
(tests/package_tree.py, the same layout import-linter reads) and points the Python handler at
it, so docs/api.md is generated from the source without importing it.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]


@event_priority(100)  # before mkdocstrings reads its handler options
def on_config(config: Any) -> Any:
    sys.path.insert(0, str(ROOT))
    from tests.package_tree import lay_out

    tree = Path(tempfile.mkdtemp(prefix="elake-docs-"))
    atexit.register(shutil.rmtree, tree, ignore_errors=True)
    python = config["plugins"]["mkdocstrings"].config["handlers"].setdefault("python", {})
    python["paths"] = [str(lay_out(tree))]
    return config
