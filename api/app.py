"""The FastAPI app: routers under /api, the web app at /, guards around everything.

Middleware, outermost first: security headers on every response (a Content-Security-Policy
that allows this origin only, and no framing), CORS (only when origins are configured:
closed by default), trusted Host names (a page on another site cannot reach the server
through DNS rebinding), authentication (who asks: the server's token or a user's, needed
once either exists), the body size limit (ours, not FastAPI's `max_body_size`, which
answers an oversized Content-Length in plain text, not our error shape). What each role
may do is checked per route (`deps.authorize`, a dependency of every API route).

At start-up the server makes sure every table exists (a lake made before a table was added
gains it) and records `interrupted` for the jobs left running by a process that died.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware

from episodelake.api import errors
from episodelake.api.deps import authorize
from episodelake.api.jobs import Jobs
from episodelake.api.maintenance import AutoCompactor, background_enricher
from episodelake.api.routes import ROUTERS, docs, exports, web
from episodelake.api.security import (
    APP_HEADER,
    AllowedHosts,
    Authentication,
    BodyLimit,
    SameOrigin,
    SecurityHeaders,
)
from episodelake.api.settings import Settings
from episodelake.lake.ops.users import Directory
from episodelake.lake.storage.lake import Lake

#: At shutdown, how long to wait for running jobs to stop at their next progress report.
JOB_STOP_WAIT_S = 10.0


def create_app(settings: Settings, lake: Lake | None = None) -> FastAPI:
    """The app for `settings`; the lake opens at start-up unless one is given."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.lake = lake if lake is not None else Lake(settings.lake, create=False)
        app.state.users = Directory(app.state.lake)
        app.state.jobs = Jobs(app.state.lake, progress_interval_s=settings.job_progress_interval_s)
        await asyncio.to_thread(app.state.jobs.open, {exports.KIND: exports.interrupted})
        compactor = AutoCompactor(app.state.lake).start()  # curation stays fast: see api/maintenance.py
        enricher = background_enricher(app.state.lake, settings.background_enrich)
        yield
        if enricher is not None:
            await asyncio.to_thread(enricher.stop)
        await asyncio.to_thread(compactor.stop)
        await asyncio.to_thread(app.state.jobs.stop, JOB_STOP_WAIT_S)

    app = FastAPI(
        title="EpisodeLake",
        summary="Replay, query and curate GUI-agent episodes.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served offline by routes/docs.py
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.settings = settings
    errors.install(app)
    for router in ROUTERS:
        app.include_router(router, prefix="/api", responses=errors.ERROR_RESPONSES,
                           dependencies=[Depends(authorize)])
    docs.mount(app)
    web.mount(app, settings.static_dir)

    # add_middleware wraps: the last added runs first
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(Authentication, token=settings.token)
    app.add_middleware(SameOrigin, trusted=settings.cors_origins)
    names = settings.host_names()
    if names is not None:
        app.add_middleware(AllowedHosts, names=names)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                           allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                           allow_headers=["Authorization", "Content-Type", APP_HEADER.decode()],
                           allow_credentials=True)
    app.add_middleware(SecurityHeaders)
    return app
