"""`elake`: the one command line that reaches every job.

Every command group is a module of this package with a `register(commands: Commands)`
function (the extension point for new commands): `lake` (info, sql, tag, optimize, recover),
`clawgui` (import/export/watch ClawGUI folders), `rollout` (rollout, demo), `collect`
(collect, serve-env, judge), `rerun`, `export` (export sft), `train`, `serve` (serve,
openapi). `commands.add(name, help)` adds a top-level command; `commands.group("export")
.add_parser(...)` adds a kind to a shared verb (`elake export sft`, `elake export clawgui`).
A command sets `func`, a function of the parsed arguments returning an exit code (or None
for 0). The command line sits on top of every package (lake, collectors, trainer, API), so
none of them imports it; each command imports what it runs when it runs, which keeps
`elake --help` fast.

Every failure prints one line to stderr and exits non-zero, never a traceback: `main` is the
one place all commands go through, so no command has to remember it. The product's own
errors (`LakeError`), DuckDB's, Lance's (storage that will not read), the operating
system's (a missing file, a full disk) and an interrupt each get a line that names what
failed; anything else is a bug, and its line says so and how to see the traceback
(`elake --debug COMMAND ...` prints it before the line).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import traceback

from episodelake.api.cli import clawgui, collect, export, lake, rerun, rollout, serve, train
from episodelake.lake.errors import LakeError
from episodelake.lake.layout import DEFAULT_LAKE, LAKE_ENV

#: Verbs shared by several packages: `elake <verb> <kind> ...`.
GROUPS = {
    "import": "bring episodes from another format into the lake",
    "export": "write episodes out of the lake (datasets, other formats)",
    "watch": "follow a folder that another tool writes and ingest as it grows",
}


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line like every other error (exit code 2), and
    `--debug` accepted after any command as well as before it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # SUPPRESS: a command that is not given --debug keeps the value `elake --debug` set.
        self.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                          help="print the traceback of an error before its one-line message")

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


class Commands:
    """What a command module's `register` receives: top-level commands and the shared verbs."""

    def __init__(self, subparsers: argparse._SubParsersAction):
        self._top = subparsers
        self._groups: dict[str, argparse._SubParsersAction] = {}

    def add(self, name: str, help: str, **kwargs) -> argparse.ArgumentParser:
        return self._top.add_parser(name, help=help, description=help, **kwargs)

    def group(self, verb: str) -> argparse._SubParsersAction:
        if verb not in self._groups:
            parser = self.add(verb, GROUPS[verb])
            self._groups[verb] = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
        return self._groups[verb]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="elake",
        description="EpisodeLake: record GUI-agent episodes into a versioned lake, query them "
        "with SQL, replay and curate them in the web app, export datasets, train.",
    )
    parser.add_argument(
        "--lake",
        default=os.environ.get(LAKE_ENV) or DEFAULT_LAKE,
        help=f"lake folder (default: ${LAKE_ENV} or {DEFAULT_LAKE})",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    parser.set_defaults(debug=False)
    commands = Commands(parser.add_subparsers(dest="command", metavar="COMMAND"))
    for module in (lake, clawgui, rollout, collect, rerun, export, train, serve):  # help order
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        logging.basicConfig(
            level=logging.INFO if args.verbose else logging.WARNING,
            format="%(levelname)s %(name)s: %(message)s",
        )
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return args.func(args) or 0
    except SystemExit:
        raise
    except BaseException as exc:  # KeyboardInterrupt too: one line, exit 130
        debug = getattr(args, "debug", False) if args is not None else "--debug" in argv
        return report_error(exc, getattr(args, "command", None), debug=debug)


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
    if isinstance(exc, LakeError):
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
