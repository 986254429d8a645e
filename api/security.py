"""Guards that must see every request and response, before routing: body size, who is
asking (tokens and users), the Host name, and the security headers of every response.

They are plain ASGI middleware rather than FastAPI dependencies because a dependency only
runs for API routes, while the token must also protect the built web app, `/openapi.json`
and `/api/docs`, an oversized body must be refused before anything reads it, and the headers
must be on every answer, errors and static files included.

How a token travels is `Authentication`'s docstring; what each role may do is
`episodelake.api.deps.authorize`'s.
"""

from __future__ import annotations

import asyncio
import hmac
import html
import json
from collections.abc import Sequence
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlsplit

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from episodelake.api.errors import (
    BadHost,
    CrossOrigin,
    PayloadTooLarge,
    Unauthorized,
    error_json,
    status_of,
)
from episodelake.lake.ops.users import Directory, Principal, token_hash
from episodelake.lake.storage.errors import EpisodeLakeError

COOKIE = "elake_token"
#: The name the server's own token (`ELAKE_TOKEN`) signs in as, with the admin role.
SERVER_USER = "server"

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
    # same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` with the
    # app's own writes, and `SameOrigin` could not tell them from a foreign page's; other
    # sites still get no Referer at all
    (b"referrer-policy", b"same-origin"),
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


#: Methods that change something; the others only read.
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: A header the web app sends with every API call. A page of another origin cannot add it
#: without a CORS preflight, which this server grants only to `cors_origins`.
APP_HEADER = b"x-episodelake-app"


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]` of a URL (an Origin or Referer header), lower-cased, the default
    port left out; None for `null` or anything that is not an http(s) URL."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    default = {"http": 80, "https": 443}[parts.scheme]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


class SameOrigin:
    """Refuse a write (POST, PUT, PATCH, DELETE: sign-in and sign-out included) that a page of
    another origin sent.

    The sign-in cookie is SameSite=Strict, but a page on another port of the same host is the
    same *site*, so its requests carry the cookie: a write is let through only when its
    `Origin` (else its `Referer`) is this server's own (the scheme and the Host the request
    was sent to; the Host is checked by `AllowedHosts`) or one of `cors_origins`. A write with
    neither header that carries the cookie must carry `APP_HEADER`; one without the cookie
    (a script with a bearer token, a client of a server without tokens) goes on, since a
    browser always sends `Origin` with a cross-origin write.
    """

    def __init__(self, app: ASGIApp, trusted: Sequence[str] = ()):
        self.app = app
        self.trusted = {o for o in (origin_of(t) for t in trusted) if o}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITES:
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        sent = headers.get(b"origin") or headers.get(b"referer")
        if sent is None:
            if COOKIE in SimpleCookie(headers.get(b"cookie", b"").decode("latin-1")) \
                    and not headers.get(b"authorization") and APP_HEADER not in headers:
                return await _reply(send, CrossOrigin(
                    f"{scope['method']} {scope['path']} refused: a write signed in by cookie must come from this "
                    "app's pages (it sent neither Origin nor Referer); scripts send `Authorization: Bearer <token>`"))
            return await self.app(scope, receive, send)
        own = origin_of(f"{scope.get('scheme', 'http')}://{headers.get(b'host', b'').decode('latin-1')}")
        origin = origin_of(sent.decode("latin-1"))
        if origin is None or (origin != own and origin not in self.trusted):
            shown = sent.decode("latin-1")[:200]
            return await _reply(send, CrossOrigin(
                f"{scope['method']} {scope['path']} refused: it came from {shown!r}, not from this server's "
                f"pages ({own}); open the app at {own} (or list the other origin in cors_origins)"))
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


#: The sign-in page: a form that posts the token (so it never sits in a URL, a history or a
#: log); plain HTML, no script, within the Content-Security-Policy.
SIGN_IN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in - EpisodeLake</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 28rem; margin: 4rem auto; padding: 0 1rem">
<main><h1>EpisodeLake</h1>
<p>This lake needs a token. Ask its admin for one (<code>elake user add NAME --role viewer</code>).</p>
<p role="alert">{message}</p>
<form method="post" action="/signin">
<input type="hidden" name="next" value="{next}">
<label for="token">Token</label><br>
<input id="token" name="token" type="password" autocomplete="current-password" required
       style="width: 100%; padding: .4rem; margin: .3rem 0 1rem">
<button type="submit">Sign in</button>
</form></main></body></html>
"""
#: What `GET /signout` shows: signing out is a POST (a form's button), never a link.
SIGN_OUT_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign out - EpisodeLake</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 28rem; margin: 4rem auto; padding: 0 1rem">
<main><h1>EpisodeLake</h1>
<form method="post" action="/signout"><button type="submit">Sign out</button></form>
<p><a href="/">Back to the app</a></p></main></body></html>
"""
#: Most bytes a sign-in form may send.
MAX_SIGN_IN_BODY = 4096
#: The sign-in page's words for a token that is not a user's (any more).
WRONG_TOKEN = "That token is not (or no longer) valid."


def sign_in_page(message: str = "", next_path: str = "/") -> str:
    """The sign-in form, saying `message`, which returns to `next_path` once signed in."""
    return SIGN_IN_PAGE.format(message=html.escape(message), next=html.escape(safe_next(next_path), quote=True))


def safe_next(path: str) -> str:
    """Where sign-in may send the browser back to: a path of this app (with its query), never
    another site (`//evil`, `/\\evil`) or the sign-in and sign-out pages; else `/`."""
    if not path.startswith("/") or path.startswith("//") or "\\" in path or not all(" " < c < "\x7f" for c in path):
        return "/"  # a path as browsers send it: printable ASCII, its other characters %-escaped
    parts = urlsplit(path)
    if parts.scheme or parts.netloc or parts.path in ("/signin", "/signout"):
        return "/"
    return path[:2000]


def _requested(scope: Scope) -> str:
    """The path and query a request asked for, as the browser would send it again."""
    query = scope.get("query_string", b"").decode("latin-1")
    return scope.get("raw_path", scope["path"].encode()).decode("latin-1") + (f"?{query}" if query else "")


class Authentication:
    """Find out who makes each request, and refuse anyone unknown where a token is needed.

    A token is needed when the server has its own (`ELAKE_TOKEN`, which acts as an admin
    named `server`) or the lake has users (`episodelake.lake.ops.users`); otherwise the
    request goes on anonymous, as on a private loopback server. The person found is put in
    the request's state (`request.state.user`, a `Principal` or None), where the routes'
    role check (`episodelake.api.deps.authorize`) and `who` read it.

    Tokens travel as `Authorization: Bearer <token>` or in the HttpOnly `elake_token`
    cookie. A browser gets the cookie from the sign-in form (`POST /signin`), which the
    server shows at whatever page the browser asked for and which returns there once signed
    in (its `next` field, kept to this app's own paths), or by opening `/?token=<token>` once
    (the link `elake serve` prints): that answer sets the cookie and redirects to `/`, so the
    token leaves the address bar; a wrong one there gets the sign-in form too. A token in any other URL is
    refused, since URLs end up in histories, logs and Referer headers.
    """

    def __init__(self, app: ASGIApp, token: str | None):
        self.app = app
        self.server = Principal(SERVER_USER, "admin") if token else None
        self.token = token

    def _directory(self, scope: Scope) -> Directory | None:
        state = getattr(scope.get("app"), "state", None)
        return getattr(state, "users", None)

    def _at_hand(self, token: str, copy: dict[str, Principal] | None) -> Principal | None:
        """The person `token` names when it can be told without reading the lake: the
        server's own token, or a user in `copy` (the users' copy, when fresh)."""
        if self.token and hmac.compare_digest(token.encode(), self.token.encode()):
            return self.server
        return None if copy is None else copy.get(token_hash(token))

    def _who(self, scope: Scope, token: str) -> Principal | None:
        known = self._at_hand(token, None)
        directory = self._directory(scope)
        return known or (directory.authenticate(token) if directory is not None else None)

    def _fresh_copy(self, scope: Scope) -> dict[str, Principal] | None:
        """The users' copy when it can be used without reading the lake ({} on a server
        without users), else None. The server's own token is not in it (see `_who`)."""
        directory = self._directory(scope)
        return {} if directory is None else directory.fresh()

    def _required(self, scope: Scope) -> bool:
        directory = self._directory(scope)
        return self.token is not None or (directory is not None and directory.any())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the app has no websockets; lifespan passes
            return await self.app(scope, receive, send)
        path, method = scope["path"], scope["method"]
        if path == "/signin" and method == "POST":
            return await self._sign_in(scope, receive, send)
        if path == "/signout":  # a POST, so an image or a link elsewhere cannot sign anyone out
            if method == "POST":
                return await _redirect(send, "/", clear_cookie=True)
            return await _page(send, 405, SIGN_OUT_PAGE, [(b"allow", b"POST")])
        headers = dict(scope["headers"])
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "token" in query:
            if path != "/" or method not in ("GET", "HEAD"):
                return await _reply(send, Unauthorized(
                    "a token in a URL is refused (URLs end up in histories and logs): send "
                    "`Authorization: Bearer <token>`, or open /?token=<token> once to sign the browser in"))
            principal = await asyncio.to_thread(self._who, scope, query["token"][0])
            if principal is None and b"text/html" in headers.get(b"accept", b""):  # a browser: the form
                return await _page(send, 401, sign_in_page(WRONG_TOKEN))
            if principal is None:
                return await _reply(send, Unauthorized("the token is wrong"))
            return await _redirect(send, "/", cookie=query["token"][0])
        copy = self._fresh_copy(scope)  # most requests: known without reading the lake
        required = (self.token is not None or bool(copy)) if copy is not None else \
            await asyncio.to_thread(self._required, scope)
        if not required:
            scope.setdefault("state", {})["user"] = None
            return await self.app(scope, receive, send)
        presented = _presented(headers)
        principal = None if presented is None else self._at_hand(presented, copy)
        if principal is None and presented is not None:  # not in the copy: read the lake
            principal = await asyncio.to_thread(self._who, scope, presented)
        if principal is None:
            wrong = presented is not None
            if method in ("GET", "HEAD") and not path.startswith("/api/") and b"text/html" in headers.get(b"accept", b""):
                return await _page(send, 401, sign_in_page(WRONG_TOKEN if wrong else "", _requested(scope)))
            return await _reply(send, Unauthorized(
                "the token is wrong (or its user was removed)" if wrong else
                "this server needs a token: send `Authorization: Bearer <token>`, or sign in at /signin"),
                [(b"www-authenticate", b"Bearer")])
        scope.setdefault("state", {})["user"] = principal
        await self.app(scope, receive, send)

    async def _sign_in(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_SIGN_IN_BODY:
                return await _reply(send, PayloadTooLarge(f"a sign-in form is at most {MAX_SIGN_IN_BODY} bytes"))
            if not message.get("more_body"):
                break
        form = parse_qs(body.decode("latin-1"))
        token = (form.get("token") or [""])[0].strip()
        next_path = safe_next((form.get("next") or ["/"])[0])
        principal = await asyncio.to_thread(self._who, scope, token) if token else None
        if principal is None:
            return await _page(send, 401, sign_in_page(WRONG_TOKEN, next_path))
        await _redirect(send, next_path, cookie=token)


def _presented(headers: dict[bytes, bytes]) -> str | None:
    """The token a request carries in its Authorization header or cookie."""
    auth = headers.get(b"authorization", b"")
    if auth[:7].lower() == b"bearer ":
        return auth[7:].strip().decode("latin-1")
    cookies = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
    return cookies[COOKIE].value if COOKIE in cookies else None


async def _redirect(send: Send, location: str, *, cookie: str | None = None, clear_cookie: bool = False) -> None:
    headers = [(b"location", location.encode()), (b"content-length", b"0"), (b"cache-control", b"no-store")]
    if cookie is not None:
        headers.append((b"set-cookie", f"{COOKIE}={cookie}; Path=/; HttpOnly; SameSite=Strict".encode()))
    if clear_cookie:
        headers.append((b"set-cookie", f"{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0".encode()))
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _page(send: Send, status: int, html: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = html.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/html; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store"),
                            *headers]})
    await send({"type": "http.response.body", "body": body})
