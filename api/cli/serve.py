"""`elake serve` (the API and web app) and `elake openapi` (the schema the web client is typed from)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from episodelake.api.settings import DEFAULT_HOST, DEFAULT_PORT, TOKEN_ENV, Settings


def register(commands) -> None:
    p = commands.add("serve", "serve the API and the web app (http://127.0.0.1:8799 by default)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to bind (default {DEFAULT_HOST}; any other needs ${TOKEN_ENV})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.set_defaults(func=cmd_serve)

    p = commands.add("openapi", "print the API's OpenAPI document (the web client's types come from it)")
    p.add_argument("--out", type=Path, help="write to this file instead of stdout")
    p.set_defaults(func=cmd_openapi)


def cmd_serve(args) -> None:
    import uvicorn

    from episodelake.api.app import create_app
    from episodelake.lake.lake import Lake

    settings = Settings.from_env(args.lake, host=args.host, port=args.port)
    lake = Lake(settings.lake, create=False)
    print(f"elake serve: lake {lake.path.resolve()} on {url_of(settings.host, settings.port)}", file=sys.stderr)
    uvicorn.run(create_app(settings, lake), host=settings.host, port=settings.port,
                log_level="info" if args.verbose else "warning")


def url_of(host: str, port: int) -> str:
    """The server's URL; an IPv6 address goes in brackets (`http://[::1]:8799/`)."""
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def cmd_openapi(args) -> None:
    from episodelake.api.app import create_app

    doc = create_app(Settings(lake=Path(args.lake), static_dir=None)).openapi()
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
