"""Guards that must see every request and response, before routing: body size, the token,
the Host name on loopback binds, and the security headers of every response.

They are plain ASGI middleware rather than FastAPI dependencies because a dependency only
runs for API routes, while the token must also protect the built web app, `/openapi.json`
and `/api/docs`, an oversized body must be refused before anything reads it, and the headers
must be on every answer, errors and static files included.

The token is accepted as `Authorization: Bearer <token>`, as the `elake_token` cookie, or
once as `?token=<token>` in a page URL (a browser cannot add headers to `<img>` requests);
a valid query token is answered with the cookie set, so links without it keep working.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Sequence
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from episodelake.api.errors import BadHost, PayloadTooLarge, Unauthorized, error_json, status_of
from episodelake.lake.core.errors import EpisodeLakeError

COOKIE = "elake_token"

#: Same-origin only: no third-party script, style, image or connection, and no framing.
#: Styles allow inline attributes: Swagger UI and React's `style` props set them (styles
#: cannot run script). Screenshots may be data: or blob: URLs.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'", "script-src 'self'", "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:", "font-src 'self' data:", "connect-src 'self'",
    "object-src 'none'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
])
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    """Add the CSP, X-Frame-Options and friends to every response (errors and files too)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        names = {name for name, _ in SECURITY_HEADERS}

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)


def host_name(header: str) -> str:
    """The name in a Host header, without its port: `[::1]:8799` -> `::1`, `a:80` -> `a`."""
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        return header[1:end] if end > 0 else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class AllowedHosts:
    """Answer 400 unless the Host header names one of `names` (any port).

    On a loopback bind this keeps a page on another site from reaching the server through
    DNS rebinding: its requests still carry its own name. IPv6 names come bracketed
    (`[::1]:8799`), which Starlette's TrustedHostMiddleware does not parse."""

    def __init__(self, app: ASGIApp, names: list[str]):
        self.app = app
        self.names = {host_name(n) if n.startswith("[") else n.lower() for n in names}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        header = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if host_name(header) not in self.names:
            return await _reply(send, BadHost(f"Host {header!r} is not this server's name: open it as "
                                              f"http://127.0.0.1 or http://localhost"))
        await self.app(scope, receive, send)


async def _reply(send: Send, error: EpisodeLakeError, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(error_json(error.kind, str(error))).encode()
    await send({"type": "http.response.start", "status": status_of(error),
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Refuse request bodies over `max_bytes`, by Content-Length or while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_large = PayloadTooLarge(f"request body is over the limit of {self.max_bytes} bytes")
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await _reply(send, too_large)
        seen = 0
        started = False

        async def limited_receive() -> Message:
            # Raised inside the route's body read: FastAPI passes HTTPExceptions through to
            # the app's error handler, which answers 413 in the usual shape.
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _BodyTooLarge(413, str(too_large))
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if started:
                raise
            await _reply(send, too_large)


class _BodyTooLarge(HTTPException):
    """The body limit, raised from `receive` (an HTTPException, so FastAPI passes it on)."""


class TokenGuard:
    """Require the token on every HTTP request when one is configured."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self.token = token.encode()

    def _presented(self, scope: Scope) -> tuple[bytes | None, bool]:
        """(token presented, whether it came in the query string)."""
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization", b"")
        if auth[:7].lower() == b"bearer ":
            return auth[7:].strip(), False
        cookies = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
        if COOKIE in cookies:
            return cookies[COOKIE].value.encode(), False
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "token" in query:
            return query["token"][0].encode(), True
        return None, False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the app has no websockets; lifespan passes
            return await self.app(scope, receive, send)
        presented, from_query = self._presented(scope)
        if presented is None:
            return await _reply(send, Unauthorized(
                "this server needs its token: send `Authorization: Bearer <ELAKE_TOKEN>`, "
                "or open the app once with ?token=<ELAKE_TOKEN>"), [(b"www-authenticate", b"Bearer")])
        if not hmac.compare_digest(presented, self.token):
            return await _reply(send, Unauthorized("the token is wrong"), [(b"www-authenticate", b"Bearer")])
        if not from_query:
            return await self.app(scope, receive, send)
        cookie = f"{COOKIE}={self.token.decode()}; Path=/; HttpOnly; SameSite=Strict".encode()

        async def with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie)]}
            await send(message)

        await self.app(scope, receive, with_cookie)
