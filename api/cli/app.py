"""What every `elake` command is built on: Typer apps with one look, and the options every
command shares.

`Commands` is a Typer app set up the way each part of the command line is: plain-text help
that shows descriptions exactly as written (no markup to escape in a SQL example), `-h` as
well as `--help`, commands whose one-line summary is listed whole, options listed under the
heading of their group (`rich_help_panel`), and a group run without a command printing its
help. A command module makes one (or one per shared verb, `elake export ...`) and
`episodelake.api.cli` adds them to the root.

The root's options (`--lake`, `-v`) and the environment (`EnvSettings`) reach a command as
`Globals`, the context's object: `globals_of(ctx)`. (`--debug` is `main`'s own: it decides how
an error is printed, after every command has ended.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandFunctionType

from episodelake.api.settings import EnvSettings

#: Help wraps at the terminal's width, however wide (click alone stops at 80 columns).
HELP_WIDTH = 100_000


@dataclass(frozen=True)
class Globals:
    """The root's options and the environment, for every command."""

    lake: str
    verbose: bool
    environment: EnvSettings


def globals_of(ctx: typer.Context) -> Globals:
    return ctx.find_root().obj


class UsageError(typer.BadParameter):
    """A usage error a command finds itself (options that exclude each other): one line and
    exit code 2, as the parser's own."""

    def format_message(self) -> str:
        return self.message


class Command(TyperCommand):
    """A command whose help lists its own options first, then the others under their
    group's heading."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        # The command's own arguments and options first, then each group in order.
        sections: dict[str, list[tuple[str, str]]] = {"Arguments": [], "Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                heading = "Arguments"
            else:
                heading = getattr(param, "rich_help_panel", None) or "Options"
            sections.setdefault(heading, []).append(record)
        for heading, records in sections.items():
            if not records:
                continue
            with formatter.section(heading):
                formatter.write_dl(records)


class Group(TyperGroup):
    """A group of commands that, run without one, prints its help and exits with 2 (a usage
    error, whose message would be the whole help)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args:
            typer.echo(ctx.get_help())
            raise typer.Exit(2)
        return super().parse_args(ctx, args)


class Commands(typer.Typer):
    """A Typer app laid out like every part of `elake`."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", Group)
        kwargs.setdefault("rich_markup_mode", None)
        kwargs.setdefault("add_completion", False)
        kwargs.setdefault("context_settings", {"help_option_names": ["-h", "--help"],
                                               "max_content_width": HELP_WIDTH})
        if "help" in kwargs:
            kwargs.setdefault("short_help", kwargs["help"])
        super().__init__(**kwargs)

    def command(self, name: str | None = None, *, summary: str | None = None,
                description: str | None = None, **kwargs: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        """`summary` is the command's line in its group's list, `description` (default: the
        summary) opens its own help."""
        kwargs.setdefault("cls", Command)
        if summary is not None:
            kwargs.update(short_help=summary, help=description or summary)
        return super().command(name, **kwargs)
