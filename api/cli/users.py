"""`elake user add | list | remove`: the people who may use a served lake, and their roles.

Once the lake has a user, `elake serve` asks every request for a user's token (loopback
included); see docs/users.md. Changes made here are recorded in the `audit` table under the
operating-system user who ran the command.
"""

from __future__ import annotations

import getpass
import json
from typing import Annotated

import typer

from episodelake.api.cli.app import Commands, globals_of

commands = Commands(help="people who may use a served lake: add (prints their token once), list, remove")

_ADD_EPILOG = """roles: viewer reads; curator also changes sets, notes, labels and views and starts
exports and re-runs; admin also deletes sets and exports, edits episodes and manages users.

\b
  elake user add alice --role curator
  curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8799/api/me"""


def operator() -> str:
    """Who runs this command, as the audit log names them."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return "cli"


@commands.command("add", summary="add a user with a role and print their token (shown once)", epilog=_ADD_EPILOG)
def cmd_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", show_default=False,
                                        help="the user's name (letters, digits and . _ : @ + = -)")],
    role: Annotated[str, typer.Option(help="viewer | curator | admin")] = "viewer",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    from episodelake.lake.ops import users
    from episodelake.lake.storage.lake import Lake

    lake = Lake(globals_of(ctx).lake, create=False)
    first = not users.list_users(lake)
    row, token = users.add(lake, name, role, by=operator())
    if as_json:
        print(json.dumps({**row, "token": token}, default=str))
        return
    print(f"added {row['name']} ({row['role']}); their token, shown this once:")
    print(token)
    if first:
        print("the lake has users now: a server of it asks every request for a user's token "
              "(open http://127.0.0.1:8799/signin, or send `Authorization: Bearer <token>`)")


@commands.command("list", summary="list the lake's users and their roles")
def cmd_list(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    from episodelake.lake.ops import users
    from episodelake.lake.storage.lake import Lake

    rows = users.list_users(Lake(globals_of(ctx).lake, create=False))
    if as_json:
        print(json.dumps(rows, default=str))
        return
    if not rows:
        print("no users: a server of this lake on loopback needs no token")
    for row in rows:
        print(f"{row['name']}\t{row['role']}\tadded {row['created_at']:%Y-%m-%d} by {row['created_by'] or '-'}")


@commands.command("remove", summary="remove a user: their token stops working")
def cmd_remove(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", show_default=False, help="the user's name")],
) -> None:
    from episodelake.lake.ops import users
    from episodelake.lake.storage.lake import Lake

    users.remove(Lake(globals_of(ctx).lake, create=False), name, by=operator())
    print(f"removed {name}")
