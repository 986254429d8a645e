"""The web app sends If-Match with every change of a versioned row: each call of a route whose
OpenAPI operation takes an `If-Match` header (read from the app itself, so a new versioned
route is covered at once) passes `ifMatch(...)` in its parameters. Without it the server
applies the change to whatever is stored, as it does for scripts: a silent overwrite."""

from __future__ import annotations

import re
from pathlib import Path

from episodelake.api.app import create_app
from episodelake.api.settings import Settings

SRC = Path(__file__).resolve().parents[2] / "web" / "src"


def versioned_operations() -> set[tuple[str, str]]:
    doc = create_app(Settings(lake="unused", static_dir=None)).openapi()
    return {(method.upper(), path) for path, item in doc["paths"].items() for method, op in item.items()
            if any(p["in"] == "header" and p["name"] == "If-Match" for p in op.get("parameters", []))}


def calls(source: str, method: str, path: str) -> list[str]:
    """The argument text of each `api.METHOD("path", ...)` call in `source`."""
    found = []
    for m in re.finditer(rf'api\.{method}\("{re.escape(path)}"', source):
        depth, i = 0, m.end() - len(f'"{path}"') - 1
        while i < len(source):
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            if depth == 0:
                break
            i += 1
        found.append(source[m.start():i + 1])
    return found


def test_every_change_of_a_versioned_row_sends_if_match():
    operations = versioned_operations()
    assert ("PATCH", "/api/sets/{set_id}") in operations and ("PATCH", "/api/sql/saved/{query_id}") in operations
    seen, missing = 0, []
    for file in sorted(SRC.rglob("*.ts*")):
        source = file.read_text()
        for method, path in operations:
            for call in calls(source, method, path):
                seen += 1
                if "ifMatch(" not in call:
                    missing.append(f"{file.relative_to(SRC)}: {call[:120]}")
    assert seen >= 7, f"found only {seen} calls of versioned routes in web/src"
    assert not missing, "calls without If-Match (pass `header: ifMatch(row.version)`):\n" + "\n".join(missing)
