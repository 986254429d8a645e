"""mypy over the four packages, with the settings in pyproject.toml [tool.mypy].

mypy cannot find `episodelake.lake` by itself: the editable install maps it onto `lake/`
with an import hook, which a static checker never runs, and `mypy lake` would name the
modules `lake.*`, so no `from episodelake.lake import ...` would resolve. `check()` hands
mypy every source file under the module name it is installed as, the way setup.py maps
them. `python tests/test_types.py` runs the check on its own (`just lint` does).

A `# type: ignore[code]` in the packages carries its reason after it (`# type:
ignore[attr-defined]  # lance's stubs lack X`), so each one can be judged and removed when
the reason goes away; mypy itself reports the ones that no longer silence anything.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lake", "collectors", "trainer", "api")
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")


def sources() -> list[tuple[str, str]]:
    """(path relative to the repository, installed module name) for every source file."""
    found = [("episodelake/__init__.py", "episodelake")]
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found.append((str(path.relative_to(ROOT)), ".".join(["episodelake", *parts])))
    return found


def check() -> list[str]:
    """mypy's messages for the packages (empty when they type-check); run from ROOT."""
    from mypy import build
    from mypy.config_parser import parse_config_file
    from mypy.errors import CompileError
    from mypy.fscache import FileSystemCache
    from mypy.modulefinder import BuildSource
    from mypy.options import Options

    def no_strict() -> None:
        raise SystemExit("pyproject.toml [tool.mypy]: name the flags instead of `strict`")

    options = Options()
    parse_config_file(options, no_strict, str(ROOT / "pyproject.toml"))
    fscache = FileSystemCache()
    targets = [BuildSource(path, module, base_dir=str(ROOT)) for path, module in sources()]
    try:
        return build.build(targets, options, fscache=fscache).errors
    except CompileError as error:
        return error.messages


def untold_ignores() -> list[str]:
    """`# type: ignore` comments without an error code or without a reason after them."""
    bad = []
    for path, _ in sources():
        for number, line in enumerate((ROOT / path).read_text().splitlines(), 1):
            match = IGNORE.search(line)
            if match and not (match["codes"] and match["rest"].strip().startswith("#")):
                bad.append(f"{path}:{number}: {line.strip()}")
    return bad


def test_sources_are_named_as_installed():
    names = dict(sources())
    assert names["lake/storage/sql.py"] == "episodelake.lake.storage.sql"
    assert names["episodelake/__init__.py"] == "episodelake"
    assert names["collectors/envs/sim/__init__.py"] == "episodelake.collectors.envs.sim"
    for path, module in list(names.items())[::25]:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin == str(ROOT / path), (path, module)


def test_every_type_ignore_names_its_code_and_reason():
    assert untold_ignores() == []


@pytest.mark.slow
def test_packages_type_check():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")
    proc = subprocess.run([sys.executable, __file__], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr


if __name__ == "__main__":
    started = time.monotonic()
    messages = check() + [f"{line}  (a type: ignore needs [code]  # reason)"
                          for line in untold_ignores()]
    print("\n".join(messages))
    errors = sum(": error:" in line or "type: ignore needs" in line for line in messages)
    print(f"mypy: {errors} errors in {len(sources())} files, {time.monotonic() - started:.0f} s",
          file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if errors else 0)  # as mypy does: freeing its object graph takes longer than the check
