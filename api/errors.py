"""The one error handler: every failure leaves the API as `{"error": {"type", "message"}}`.

`LakeError`s keep their status and message; FastAPI's validation errors become
`InvalidInput` naming each bad field; routing errors (404, 405) keep their status; anything
else is a bug, logged with its traceback and answered with a 500 that reveals nothing.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from episodelake.lake.errors import InvalidInput, LakeError

log = logging.getLogger(__name__)


class ErrorDetail(BaseModel):
    type: str
    message: str


class ErrorBody(BaseModel):
    """The shape of every error response."""

    error: ErrorDetail


#: Documented on every route so clients (and schemathesis) know the error shape.
ERROR_RESPONSES = {code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 422)}


_HTTP_KINDS = {404: "NotFound", 405: "MethodNotAllowed", 413: "PayloadTooLarge"}


def _field(loc: tuple) -> str:
    return ".".join(str(p) for p in loc if p != "body") or "body"


def _validation_message(exc: RequestValidationError) -> str:
    return "; ".join(f"{_field(tuple(e['loc']))}: {e['msg']}" for e in exc.errors()[:10])


def install(app: FastAPI) -> None:
    @app.exception_handler(LakeError)
    async def lake_error(_: Request, exc: LakeError) -> JSONResponse:
        return JSONResponse(exc.to_json(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        err = InvalidInput(_validation_message(exc))
        return JSONResponse(err.to_json(), status_code=err.status)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        kind = _HTTP_KINDS.get(exc.status_code, "HTTPError")
        return JSONResponse({"error": {"type": kind, "message": str(exc.detail)}},
                            status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse({"error": {"type": "InternalError",
                                       "message": "internal error; the server log has the details"}},
                            status_code=500)
