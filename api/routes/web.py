"""The built React app on the same port as the API, with an SPA fallback.

Every path that is not an API route or a built file answers with index.html, so a view's
URL (/episodes/<id>/steps/<n>, /sets, /sql, ...) opens directly and the app's router takes
over. Files are served only from inside the build folder; a path the filesystem cannot
even name (a NUL byte, a name too long) is a 404, never a 500.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from episodelake.api.errors import WebAppNotBuilt
from episodelake.lake.storage.errors import NotFound


def mount(app: FastAPI, static_dir: Path | None) -> None:
    root = static_dir.resolve() if static_dir else None
    if root is not None and (root / "assets").is_dir():
        # hashed file names: a build never changes a file in place
        app.mount("/assets", StaticFiles(directory=root / "assets"), name="assets")

    @app.get("/{path:path}", include_in_schema=False)
    def spa(path: str) -> FileResponse:
        if "\x00" in path:
            raise NotFound("no such file: the path holds a NUL byte")
        if path == "api" or path.startswith("api/"):
            raise NotFound(f"no API route /{path}; /api/docs lists them")
        if root is None:
            raise WebAppNotBuilt("the web app is not built: run `just web` (the API under /api works)")
        try:
            candidate = (root / path).resolve()
            found = bool(path) and candidate.is_file() and candidate.is_relative_to(root)
        except (OSError, ValueError):
            raise NotFound(f"no such file: /{path[:200]}") from None
        if found:
            return FileResponse(candidate)
        return FileResponse(root / "index.html", headers={"Cache-Control": "no-cache"})
