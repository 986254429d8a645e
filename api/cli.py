"""`elake`: the one command line that reaches every job.

Each package contributes its own subcommands through a `commands` module with a
`register(commands: Commands)` function (the extension point for new commands): lake
maintenance and SQL live in `episodelake.lake.commands`, recording/import/rollouts in
`episodelake.collectors.commands`, training in `episodelake.trainer.commands`, serving and
exports in `episodelake.api.commands`. `commands.add(name, help)` adds a top-level command;
`commands.group("export").add_parser(...)` adds a kind to a shared verb (`elake export sft`,
`elake export clawgui`). A command sets `func`, a function of the parsed arguments returning
an exit code (or None for 0).

User errors (`LakeError`, bad arguments) print one line to stderr and exit non-zero, without
a traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from episodelake.lake.errors import LakeError
from episodelake.lake.layout import DEFAULT_LAKE, LAKE_ENV

#: Verbs shared by several packages: `elake <verb> <kind> ...`.
GROUPS = {
    "import": "bring episodes from another format into the lake",
    "export": "write episodes out of the lake (datasets, other formats)",
    "watch": "follow a folder that another tool writes and ingest as it grows",
}

COMMAND_MODULES = (
    "episodelake.lake.commands",
    "episodelake.collectors.commands",
    "episodelake.collectors.rollout_commands",
    "episodelake.collectors.device_commands",
    "episodelake.collectors.rerun_commands",
    "episodelake.lake.export.commands",
    "episodelake.trainer.commands",
    "episodelake.api.commands",
)


class Commands:
    """What a package's `register` receives: top-level commands and the shared verbs."""

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
    parser = argparse.ArgumentParser(
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
    commands = Commands(parser.add_subparsers(dest="command", metavar="COMMAND"))
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue  # that package has no commands yet
            raise
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except LakeError as exc:
        print(f"elake {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"elake {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
