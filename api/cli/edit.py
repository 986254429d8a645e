"""`elake purge`, `elake episode retask | delete | split | merge`, `elake steps delete`: repairing
what collection got wrong, and removing data for good.

Edits make new versions (the previous state stays readable in older versions and tags until
a purge); a purge removes episodes from every version and tag and proves it. Each runs as a
job (`elake`'s jobs record). See docs/editing.md.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from episodelake.api.cli.app import Commands, globals_of

purges = Commands()
episodes = Commands(help="repair episodes: fix the task, delete, split one that ran two tasks, merge one cut in two")
steps = Commands(help="repair steps: delete frames of an episode")

_PURGE_EPILOG = """examples:

\b
  elake purge --episode 0b1c... --dry-run
  elake purge --where "run_id = 'r7' AND device = 'pixel-3'" --yes
  elake purge --episode 0b1c... --yes --delete-exports"""


def _print(report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=2, default=str))
        return
    for key, value in report.items():
        print(f"{key}: {json.dumps(value, default=str) if isinstance(value, dict | list) else value}")


@purges.command("purge", summary="remove episodes and their screenshots from every version and tag, "
                "for good, and prove it", epilog=_PURGE_EPILOG)
def cmd_purge(
    ctx: typer.Context,
    episode: Annotated[list[str] | None, typer.Option(
        metavar="ID", help="an episode to purge (repeat for more); one deleted earlier is found in older versions")] = None,
    where: Annotated[str | None, typer.Option(
        metavar="SQL", help="purge the episodes whose `episodes` row matches this condition (current version)")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="purge; without it, only print what would go")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print what would go and change nothing")] = False,
    delete_exports: Annotated[bool, typer.Option(
        "--delete-exports", help="also delete the export folders that hold the data (listed otherwise)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    from episodelake.lake.core import purge
    from episodelake.lake.core.errors import InvalidInput, NotFound
    from episodelake.lake.core.lake import Lake

    lake = Lake(globals_of(ctx).lake, create=False)
    pending = purge.unfinished(lake)
    if yes and not dry_run:
        for record in pending:
            report = purge.resume(lake, record)
            print(f"finished the purge {record['job_id']} that had stopped "
                  f"({report['episodes']} episode(s))")
            lake.invalidate()
    elif pending:
        print(f"unfinished purge(s) {', '.join(r['job_id'] for r in pending)}: `--yes` finishes them first")
    try:
        ids = purge.select(lake, where=where, episode_ids=episode or ())
    except (InvalidInput, NotFound):
        if pending and yes and not dry_run:  # re-run after a stop: the selection was the stopped purge's
            print("nothing else to purge")
            return
        raise
    if dry_run or not yes:
        summary = purge.plan(lake, ids).summary()
        _print(summary, as_json)
        if not as_json:
            print("nothing changed: add --yes to purge" if not dry_run else "dry run: nothing changed")
        return
    report = purge.purge(lake, ids, where=where, delete_exports=delete_exports)
    _print(report, as_json)
