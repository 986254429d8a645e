"""The one error handler: every failure leaves the API as `{"error": {"type", "message"}}`.

The product's errors (`episodelake.lake.storage.errors`) know nothing of HTTP; `STATUS` gives each
class its status here, in one table, and the most specific class listed wins (a subclass
defined outside the product, or at run time, answers as its nearest listed base). Every
class the product defines is listed: a test walks the packages and fails on one that is not,
so a new error gets its status decided rather than inherited by accident.

FastAPI's validation errors become `InvalidInput` naming each bad field, except that an error
a model's own check raised (an `InvalidInput` is a `ValueError`, which pydantic reports as a
field's error) answers as it was raised; routing errors (404, 405) keep their status;
anything else is a bug, logged with its traceback and answered with a 500 that reveals
nothing. The classes that also inherit a builtin (`InvalidInput` a `ValueError`, `NotFound` a
`LookupError`) answer by their product class: nothing here is keyed by a builtin.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from episodelake.collectors.agents.model_client import ModelError
from episodelake.collectors.jobs.branch import BranchesRefused
from episodelake.lake.curation.versions import StaleVersion
from episodelake.lake.export.errors import (
    EmptySelection,
    ExportFolderNotOurs,
    SetEpisodesMissing,
    UnknownFormat,
)
from episodelake.lake.storage.claims import MachineIdTaken
from episodelake.lake.storage.errors import (
    ActionFailed,
    BranchDiverged,
    Conflict,
    DeviceError,
    DeviceUnavailable,
    EnvironmentLost,
    EpisodeLakeError,
    InvalidInput,
    LakeCorrupt,
    LakeError,
    NotAllowed,
    NotFound,
    SqlRefused,
)
from episodelake.lake.storage.spool import SpoolWriteError
from episodelake.lake.storage.store import StoreSilent, StoreUnavailable
from episodelake.lake.storage.tables import CommitContention, DatasetMissing, StorageFull
from episodelake.lake.storage.writer import Backpressure, CommitFailed
from episodelake.lake.vocab.spec_model import raised
from episodelake.trainer.config import ConfigError

log = logging.getLogger(__name__)


# -- the API's own errors ----------------------------------------------------------------------
class Unauthorized(EpisodeLakeError):
    """No token, or a wrong one, where the server requires one."""


class Forbidden(NotAllowed):
    """A signed-in person whose role does not allow what they asked."""


class CrossOrigin(Forbidden):
    """A write sent by a page of another origin (or, signed in by cookie, with no origin)."""


class PayloadTooLarge(EpisodeLakeError):
    """A request body over the server's limit."""


class BadHost(EpisodeLakeError):
    """A Host header that is not the server's name (DNS rebinding)."""


class WebAppNotBuilt(EpisodeLakeError):
    """The server has no built web app to serve."""


#: The HTTP status of each error class; the most specific class listed wins.
STATUS: dict[type[EpisodeLakeError], int] = {
    EpisodeLakeError: 400,
    InvalidInput: 422,
    UnknownFormat: 422,
    ConfigError: 422,
    NotFound: 404,
    EmptySelection: 404,
    SetEpisodesMissing: 404,
    Conflict: 409,
    StaleVersion: 412,  # If-Match named an older version than the stored one
    ExportFolderNotOurs: 409,
    # the lake: a refused query is the caller's; the rest is the server's storage
    LakeError: 500,
    SqlRefused: 400,
    LakeCorrupt: 500,
    DatasetMissing: 500,  # a table of the lake gone from under the server
    CommitContention: 503,
    CommitFailed: 503,
    Backpressure: 503,
    StorageFull: 507,
    SpoolWriteError: 507,
    StoreUnavailable: 503,
    StoreSilent: 503,
    # what the server talks to: a gateway's statuses
    DeviceError: 502,
    DeviceUnavailable: 503,
    EnvironmentLost: 503,
    ActionFailed: 422,
    ModelError: 502,
    # branching: a replay that did not reach the parent's screen is the device state's conflict
    # with the recorded one (the request was fine; the device is not where the parent was), and
    # a job none of whose branches could start is its input's (K, the parents) problem
    BranchDiverged: 409,
    BranchesRefused: 422,
    # a second machine writing the lake under a taken ELAKE_MACHINE_ID
    MachineIdTaken: 409,
    # the API's own
    Unauthorized: 401,
    Forbidden: 403,
    CrossOrigin: 403,
    NotAllowed: 403,
    PayloadTooLarge: 413,
    BadHost: 400,
    WebAppNotBuilt: 503,
}


def status_of(exc: EpisodeLakeError) -> int:
    """The status of `exc`'s most specific class in `STATUS`."""
    return next(STATUS[cls] for cls in type(exc).__mro__ if cls in STATUS)


def error_json(kind: str, message: str) -> dict:
    """The body of every error response."""
    return {"error": {"type": kind, "message": message}}


def error_response(exc: EpisodeLakeError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_json(exc.kind, str(exc)), status_code=status_of(exc), headers=headers)


class ErrorDetail(BaseModel):
    type: str
    message: str


class ErrorBody(BaseModel):
    """The shape of every error response."""

    error: ErrorDetail


#: Documented on every route so clients (and schemathesis) know the error shape.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409, 413, 422)}


#: Documented on the routes that honour `If-Match` (changes of sets, views, saved queries).
STALE_RESPONSES: dict[int | str, dict[str, Any]] = {
    412: {"model": ErrorBody, "description": "If-Match named an older version: the message says who saved the "
          "newer one and when"}}


_HTTP_KINDS = {404: "NotFound", 405: "MethodNotAllowed", 413: "PayloadTooLarge"}


def _field(loc: tuple) -> str:
    return ".".join(str(p) for p in loc if p != "body") or "body"


def _validation_message(exc: RequestValidationError) -> str:
    return "; ".join(_problem(e) for e in exc.errors()[:10])


def _problem(error: dict) -> str:
    own = raised([error])  # a check's own error names the field in its own words
    return str(own) if own is not None else f"{_field(tuple(error['loc']))}: {error['msg']}"


def install(app: FastAPI) -> None:
    @app.exception_handler(EpisodeLakeError)
    async def product_error(_: Request, exc: EpisodeLakeError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        # a model's own check (an `InvalidInput`, so a `ValueError` pydantic reports as a
        # field's error) answers as it was raised: its class, status and message
        own = raised(exc.errors())
        return error_response(own if own is not None else InvalidInput(_validation_message(exc)))

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        kind = _HTTP_KINDS.get(exc.status_code, "HTTPError")
        return JSONResponse(error_json(kind, str(exc.detail)), status_code=exc.status_code,
                            headers=exc.headers)

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse(error_json("InternalError", "internal error; the server log has the details"),
                            status_code=500)
