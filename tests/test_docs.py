"""The manual in docs/ against the product: it builds strictly, and it names every command and
setting there is (as datasette's test_docs.py holds its docs to its plugin hooks and views).

docs/cli.md lists every `elake` command between two markers; the list is made from the real
command tree, so after adding or renaming a command run

    .venv/bin/python tests/test_docs.py

to rewrite it (then say more in the page's tables by hand where the one-line help is not
enough). The tests read the tree, not the list, so an undocumented command fails them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from episodelake.api.cli import app
from episodelake.api.settings import EnvSettings, Settings

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CLI_PAGE = DOCS / "cli.md"
SETTINGS_PAGE = DOCS / "settings.md"
README = ROOT / "README.md"
README_MAX_LINES = 200
#: The generated command list sits between these two lines of docs/cli.md.
BEGIN = "<!-- commands: made by `python tests/test_docs.py` from the command tree; do not edit -->"
END = "<!-- /commands -->"
#: Where the product reads environment variables (tests and benchmarks set their own).
PACKAGES = ("lake", "collectors", "trainer", "api")
ENV_VARIABLE = re.compile(r"\bELAKE_[A-Z][A-Z0-9_]*\b")


def commands(command: Any | None = None, path: str = "elake") -> Iterator[tuple[str, Any]]:
    """(`elake a b`, click command) for every command and group under `command`, depth first
    in the order `--help` lists them. Typer vendors click, so groups are told by their
    `commands`, not by click's class."""
    command = typer.main.get_command(app) if command is None else command
    for name, sub in getattr(command, "commands", {}).items():
        if sub.hidden:
            continue
        yield f"{path} {name}", sub
        yield from commands(sub, f"{path} {name}")


def render_commands() -> str:
    """The command list of docs/cli.md, markers included."""
    rows = ["| command | what it does |", "|---|---|"]
    for path, command in commands():
        summary = command.get_short_help_str(limit=1000).replace("|", "\\|")
        kind = " (group)" if hasattr(command, "commands") else ""
        rows.append(f"| `{path}`{kind} | {summary} |")
    return "\n".join([BEGIN, "", *rows, "", END])


def write_command_list(page: Path = CLI_PAGE) -> bool:
    """Rewrite the list in `page` from the command tree; True if it changed."""
    text = page.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    new = text[:start] + render_commands() + text[end:]
    page.write_text(new)
    return new != text


def mentions(text: str, name: str) -> bool:
    """`name` in `text` as a whole name: `elake serve` is not found in `elake serve-env`."""
    return re.search(re.escape(name) + r"(?![\w-])", text) is not None


def test_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a broken link or anchor, or a page missing from the nav, fails."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        pytest.fail("mkdocs is not installed: pip install -c constraints.txt -e '.[dev]'")
    result = subprocess.run(
        [str(mkdocs), "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # no end-of-life banner
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "cli" / "index.html").is_file()


def test_the_command_tree_is_walked() -> None:
    found = dict(commands())
    # A group's own commands are reached, not only the root's.
    assert {"elake sql", "elake export", "elake export sft", "elake collect adb"} <= found.keys()


@pytest.mark.parametrize("path", [path for path, _ in commands()])
def test_every_command_is_documented(path: str) -> None:
    assert mentions(CLI_PAGE.read_text(), f"`{path}"), (
        f"`{path}` is not in docs/cli.md: run `python tests/test_docs.py` to list it")


def test_the_command_list_names_no_command_that_is_gone() -> None:
    text = CLI_PAGE.read_text()
    listed = re.findall(r"^\| `(elake[^`]*)`", text[text.index(BEGIN):text.index(END)], re.MULTILINE)
    gone = sorted(set(listed) - {path for path, _ in commands()})
    assert listed and not gone, f"docs/cli.md lists {gone}: run `python tests/test_docs.py`"


def test_command_list_mentions_are_whole_names() -> None:
    assert mentions("`elake serve` and `elake serve-env`", "`elake serve")
    assert not mentions("`elake serve-env`", "`elake serve")


def environment_variables() -> set[str]:
    """Every ELAKE_* variable the product reads: the settings class's fields and any other
    name its source code spells out."""
    names = {EnvSettings.variable(field) for field in EnvSettings.model_fields}
    for package in PACKAGES:
        for source in (ROOT / package).rglob("*.py"):
            names |= set(ENV_VARIABLE.findall(source.read_text()))
    return names


@pytest.mark.parametrize("variable", sorted(environment_variables()))
def test_every_environment_variable_is_documented(variable: str) -> None:
    assert mentions(SETTINGS_PAGE.read_text(), f"`{variable}`"), f"${variable} is not in docs/settings.md"


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_server_setting_is_documented(field: str) -> None:
    assert mentions(SETTINGS_PAGE.read_text(), f"`{field}`"), (
        f"Settings.{field} (api/settings.py) is not in docs/settings.md")


def test_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail into docs/")


if __name__ == "__main__":
    changed = write_command_list()
    print(f"{CLI_PAGE.relative_to(ROOT)}: command list {'rewritten' if changed else 'up to date'}")
