"""The installed package laid out as a folder tree, for tools that read files.

setup.py maps the top-level folders onto one package (`lake/` installs as `episodelake.lake`);
the running import system knows the mapping (the editable install's finder), but tools that
walk a package's folder on disk (grimp behind import-linter, griffe behind the manual's API
page) look for `episodelake/lake/` and find only `episodelake/__init__.py`. `lay_out` builds
that tree from the repository's Python files (hard links where the file system allows, else
copies: grimp does not walk into linked folders), and

    python -m tests.package_tree lint-imports

runs a command with the tree first on PYTHONPATH (`just lint` and tests/test_architecture.py
run lint-imports this way; docs/hooks/package_tree.py points mkdocstrings at it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("lake", "collectors", "trainer", "api")


def lay_out(into: Path) -> Path:
    """`into/episodelake/` holding the package's Python files (and `py.typed`) where they
    install; returns `into`, the folder to put on a tool's path."""
    sources = [(path, path.relative_to(ROOT)) for path in (ROOT / "episodelake").iterdir() if path.is_file()]
    sources.append((ROOT / "pyproject.toml", Path("pyproject.toml")))  # the tools' settings
    for folder in FOLDERS:
        sources += [(path, Path("episodelake") / path.relative_to(ROOT)) for path in (ROOT / folder).rglob("*.py")]
    for source, relative in sources:
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:  # another file system
            shutil.copy2(source, target)
    return into


def env_with(tree: Path) -> dict[str, str]:
    """This process's environment with `tree` first on PYTHONPATH, then the repository."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
    """Run `command` in the laid-out tree, with it first on the path (import-linter puts its
    working folder first, where the repository's own `episodelake/` would hide the tree)."""
    with tempfile.TemporaryDirectory(prefix="elake-tree-") as tmp:
        tree = lay_out(Path(tmp))
        return subprocess.run(command, cwd=tree, env=env_with(tree), check=False, **kwargs)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m tests.package_tree COMMAND [ARGS...]")
    raise SystemExit(run(sys.argv[1:]).returncode)
