"""`elake`: the one command line that reaches every job.

One Typer app (`app`): each command module of this package holds its commands as a `Commands`
app (`episodelake.api.cli.app`), and this module adds them to the root in help order, by
direct import: `lake` (info, sql, tag, optimize, recover), `clawgui` (import/export/watch
ClawGUI folders), `rollout` (rollout, demo), `collect` (collect, serve-env, judge), `rerun`, `branch`,
`enrich` (enrich, search, similar), `export` (export sft), `train`, `serve` (serve, openapi), `users` (user add|list|remove). A verb that several modules share
(`elake export sft`, `elake export clawgui`) is a group made here from each module's part.
Options made from a spec model's fields come from `model_options`. The command line sits on
top of every package (lake, collectors, trainer, API), so none of them imports it; each
command imports what it runs when it runs, which keeps `elake --help` fast.

Every failure prints one line to stderr and exits non-zero, never a traceback: `main` is the
one place all commands go through, so no command has to remember it. The product's own
errors (`EpisodeLakeError`), DuckDB's, Lance's (storage that will not read), the operating
system's (a missing file, a full disk), a usage error (exit code 2) and an interrupt each get a
line that names what failed; anything else is a bug, and its line says so and how to see the
traceback (`elake --debug COMMAND ...` prints it before the line).
"""

from __future__ import annotations

import logging
import re
import sys
import traceback
from typing import Annotated

import typer

from episodelake.api.cli import (
    branch,
    clawgui,
    collect,
    edit,
    enrich,
    export,
    lake,
    lineage,
    rerun,
    rollout,
    serve,
    train,
    users,
)
from episodelake.api.cli.app import Commands, Globals
from episodelake.api.settings import EnvSettings
from episodelake.lake.storage.errors import EpisodeLakeError
from episodelake.lake.storage.store import DEFAULT_LAKE

DEBUG_FLAG = "--debug"

app = Commands(
    name="elake",
    help="EpisodeLake: record GUI-agent episodes into a versioned lake, query them with SQL, "
    "replay and curate them in the web app, export datasets, train.",
)


@app.callback()
def root(
    ctx: typer.Context,
    lake_dir: Annotated[str | None, typer.Option(
        "--lake", show_default=False,
        help=f"lake folder or URI, e.g. s3://bucket/prefix (default: ${EnvSettings.variable('lake')} or {DEFAULT_LAKE})")] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="log progress details")] = False,
    debug: Annotated[bool, typer.Option(
        DEBUG_FLAG, help="print the traceback of an error before its one-line message "
        "(before or after the command)")] = False,
) -> None:
    environment = EnvSettings.load()
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = Globals(lake=environment.lake if lake_dir is None else lake_dir, verbose=verbose,
                      environment=environment)


def verb(summary: str, *parts: typer.Typer) -> Commands:
    """A verb several modules share (`elake export sft`, `elake export clawgui`): one group
    made of each module's part."""
    group = Commands(help=summary)
    for part in parts:
        group.add_typer(part)
    return group


# In the order `elake --help` lists them.
app.add_typer(lake.commands)
app.add_typer(verb("bring episodes from another format into the lake", clawgui.imports), name="import")
app.add_typer(verb("write episodes out of the lake (datasets, other formats)",
                   clawgui.exports, export.exports), name="export")
app.add_typer(verb("follow a folder that another tool writes and ingest as it grows",
                   clawgui.watches), name="watch")
app.add_typer(rollout.commands)
app.add_typer(collect.kinds, name="collect")
app.add_typer(collect.commands)
app.add_typer(rerun.commands)
app.add_typer(branch.commands)
app.add_typer(enrich.commands)
app.add_typer(edit.episodes, name="episode")
app.add_typer(edit.steps, name="steps")
app.add_typer(edit.purges)
app.add_typer(train.commands)
app.add_typer(lineage.commands)
app.add_typer(serve.commands)
app.add_typer(users.commands, name="user")


def main(argv: list[str] | None = None) -> int:
    """Run `elake` with `argv` (default: the process's) and return its exit code. Like any
    parser, `--help` (and a group given no command) exits with SystemExit, and so does a usage
    error, after its one line."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # `--debug` is accepted after the command too: it moves to the root, where it is defined.
    end = argv.index("--") if "--" in argv else len(argv)
    debug = DEBUG_FLAG in argv[:end]
    if debug:
        argv = [DEBUG_FLAG, *(a for a in argv[:end] if a != DEBUG_FLAG), *argv[end:]]
    command = typer.main.get_command(app)
    ctx = None
    try:
        with command.make_context("elake", argv) as ctx:
            return command.invoke(ctx) or 0
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except SystemExit:
        raise
    except typer.TyperException as exc:  # the parser's: a bad option or value, a missing argument
        code = getattr(exc, "exit_code", 2)
        parsed = getattr(exc, "ctx", None)
        path = parsed.command_path if parsed is not None else "elake"
        message = exc.format_message().replace("Value error, ", "").rstrip(".")
        hint = f" (see `{path} --help`)" if code == 2 else ""
        print(f"{path}: {message[:1].lower()}{message[1:]}{hint}", file=sys.stderr)
        raise SystemExit(code) from None
    except BaseException as exc:  # KeyboardInterrupt too: one line, exit 130
        return report_error(exc, ctx.invoked_subcommand if ctx is not None else None, debug=debug)


#: Rust source locations that Lance appends to its messages: noise to a user.
_RUST_LOCATION = re.compile(r",?\s*/\S+\.rs:\d+:\d+")
#: Lines of DuckDB's caret markers under a query (meaningless once joined into one line).
_CARETS = re.compile(r"^[\s^]*$")
#: Longest message printed; DuckDB and Lance can quote whole queries and plans.
MAX_MESSAGE = 2000


def one_line(text: str) -> str:
    """`text` as one line: its non-blank lines joined, Rust locations and carets dropped."""
    text = _RUST_LOCATION.sub("", text)
    line = " ".join(part.strip() for part in text.splitlines() if not _CARETS.match(part))
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 3] + "..."


def _from_lance(exc: BaseException) -> bool:
    """True for an error that Lance raised (its Python layer or its Rust core)."""
    if "LanceError" in str(exc):
        return True
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module == "lance" or module.startswith("lance."):
            return True
        tb = tb.tb_next
    return False


def describe_error(exc: BaseException) -> tuple[str, int]:
    """(the one-line message, the exit code) for an error that ended a command."""
    import duckdb

    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", 130
    if isinstance(exc, EpisodeLakeError):
        return one_line(str(exc)), 1
    if isinstance(exc, duckdb.Error):
        return one_line(f"DuckDB: {exc}"), 1
    if isinstance(exc, (OSError, ValueError, RuntimeError)) and _from_lance(exc):
        return one_line(f"Lance could not read or write the lake: {exc} "
                        "(`elake recover` checks that every table reads)"), 1
    if isinstance(exc, OSError):  # the machine's: a missing file, no permission, a full disk
        if exc.strerror and exc.filename is not None:
            return one_line(f"{exc.strerror}: {exc.filename}"), 1
        return one_line(str(exc) or type(exc).__name__), 1
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return one_line(f"unexpected error: {detail}") + " (run with --debug for the traceback)", 1


def report_error(exc: BaseException, command: str | None = None, *, debug: bool = False) -> int:
    """Print `exc` as one line on stderr (after its traceback when `debug`); the exit code."""
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    message, code = describe_error(exc)
    print(f"elake {command}: {message}" if command else f"elake: {message}", file=sys.stderr)
    return code
