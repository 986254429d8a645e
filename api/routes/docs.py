"""/api/docs: Swagger UI for the OpenAPI document, served entirely by this server.

The page, its starter script and the stylesheet that overrides Swagger UI's colours for
contrast are files in `api/docs/`; Swagger UI's own script and stylesheet come from the
`fastapi-offline` package, which ships them (untouched, so upgrading it is a version bump). Nothing loads from a
CDN, so the docs render offline and no third-party script runs on the API's origin (the
Content-Security-Policy would block it anyway).
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

PAGE_DIR = Path(__file__).resolve().parent.parent / "docs"
VENDOR_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"


def mount(app: FastAPI) -> None:
    """Add /api/docs; call before the web app's catch-all route."""
    app.mount("/api/docs/vendor", StaticFiles(directory=VENDOR_DIR), name="docs-vendor")

    @app.get("/api/docs", include_in_schema=False)
    def docs_page() -> FileResponse:
        return FileResponse(PAGE_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    @app.get("/api/docs/swagger-init.js", include_in_schema=False)
    def docs_init() -> FileResponse:
        return FileResponse(PAGE_DIR / "swagger-init.js", media_type="text/javascript",
                            headers={"Cache-Control": "no-cache"})

    @app.get("/api/docs/docs.css", include_in_schema=False)
    def docs_style() -> FileResponse:
        return FileResponse(PAGE_DIR / "docs.css", media_type="text/css", headers={"Cache-Control": "no-cache"})
