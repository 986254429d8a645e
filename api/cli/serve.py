"""`elake serve` (the API and web app) and `elake openapi` (the schema the web client is typed from)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from episodelake.api.cli.app import Commands, globals_of
from episodelake.api.settings import DEFAULT_HOST, DEFAULT_PORT, TOKEN_ENV, Settings

commands = Commands()


@commands.command("serve", summary="serve the API and the web app (http://127.0.0.1:8799 by default)")
def cmd_serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(show_default=False, help=f"address to bind (default {DEFAULT_HOST}; "
                                      f"any other needs ${TOKEN_ENV})")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help=f"port (default {DEFAULT_PORT})", show_default=False)] = DEFAULT_PORT,
    background_enrich: Annotated[str, typer.Option(
        metavar="NAMES", help="derived step columns a background worker fills as steps are committed: "
        "comma-separated elake enrich names, or none (default phash: perceptual hashes and anchor keys)")] = "phash",
) -> None:
    import uvicorn

    from episodelake.api.app import create_app
    from episodelake.lake.ops import users
    from episodelake.lake.storage.lake import Lake

    options = globals_of(ctx)
    names = tuple(n.strip() for n in background_enrich.split(",") if n.strip() not in ("", "none"))
    settings = Settings.from_env(options.environment, lake=options.lake, host=host, port=port,
                                 background_enrich=names)
    lake = Lake(settings.lake, create=False)
    print(f"elake serve: lake {lake.path.resolve()} on {url_of(settings.host, settings.port)}", file=sys.stderr)
    people = users.list_users(lake)
    if people:
        print(f"elake serve: the lake has {len(people)} user(s): every request needs one's token (the app "
              "asks for it at sign-in; `elake user add NAME` makes one)", file=sys.stderr)
    uvicorn.run(create_app(settings, lake), host=settings.host, port=settings.port,
                log_level="info" if options.verbose else "warning")


def url_of(host: str, port: int) -> str:
    """The server's URL; an IPv6 address goes in brackets (`http://[::1]:8799/`)."""
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


@commands.command("openapi", summary="print the API's OpenAPI document (the web client's types come from it)")
def cmd_openapi(
    ctx: typer.Context,
    out: Annotated[Path | None, typer.Option(help="write to this file instead of stdout")] = None,
) -> None:
    from episodelake.api.app import create_app

    doc = create_app(Settings(lake=globals_of(ctx).lake, static_dir=None)).openapi()
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if out:
        out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
