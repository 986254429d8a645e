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
    from episodelake.lake.ops import purge
    from episodelake.lake.storage.errors import InvalidInput, NotFound
    from episodelake.lake.storage.lake import Lake

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


def _lake(ctx: typer.Context):
    from episodelake.lake.storage.lake import Lake

    return Lake(globals_of(ctx).lake, create=False)


def _done(report: dict, as_json: bool, line: str) -> None:
    if as_json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(f"{line} (job {report['job_id']}; `elake episode undo {report['job_id']}` puts it back)")


_Json = Annotated[bool, typer.Option("--json", help="print JSON")]


@episodes.command("retask", summary="give an episode another task name and/or goal")
def cmd_retask(
    ctx: typer.Context,
    episode_id: Annotated[str, typer.Argument(metavar="ID", show_default=False, help="the episode")],
    task: Annotated[str | None, typer.Option(metavar="NAME", help="the task name")] = None,
    goal: Annotated[str | None, typer.Option(metavar="TEXT", help="the task goal")] = None,
    group: Annotated[str | None, typer.Option(
        metavar="GROUP", help="put it in this group (default: out of its group when the task changes)")] = None,
    as_json: _Json = False,
) -> None:
    from episodelake.lake.ops import edits

    report = edits.retask(_lake(ctx), episode_id, task=task, goal=goal, group=group)
    line = f"retasked {episode_id}: {', '.join(report['fields'])}"
    if report.get("group_left"):
        line += f"; it left group {report['group_left']}"
    _done(report, as_json, line)


@episodes.command("delete", summary="delete episodes from the current version (older versions keep them "
                  "until a purge)")
def cmd_delete(
    ctx: typer.Context,
    episode_ids: Annotated[list[str] | None, typer.Argument(metavar="ID...", show_default=False,
                                                            help="the episodes (or --where)")] = None,
    where: Annotated[str | None, typer.Option(metavar="SQL", help="the episodes matching this condition "
                                              "over `episodes`")] = None,
    as_json: _Json = False,
) -> None:
    from episodelake.lake.ops import edits

    report = edits.delete(_lake(ctx), episode_ids or (), where=where)
    _done(report, as_json, f"deleted {len(report['episode_ids'])} episode(s): "
          + ", ".join(f"{n} {t}" for t, n in report["rows_removed"].items() if n))


@episodes.command("split", summary="cut an episode before step STEP: the rest becomes a new episode")
def cmd_split(
    ctx: typer.Context,
    episode_id: Annotated[str, typer.Argument(metavar="ID", show_default=False, help="the episode to cut")],
    at: Annotated[int, typer.Option("--at", metavar="STEP", help="the first step of the new episode")],
    new_id: Annotated[str | None, typer.Option(metavar="ID", help="the new episode's id (default ID.STEP)")] = None,
    as_json: _Json = False,
) -> None:
    from episodelake.lake.ops import edits

    report = edits.split(_lake(ctx), episode_id, at, new_id=new_id)
    first, second = report["episode_ids"]
    _done(report, as_json, f"split {first} ({report['steps'][0]} steps) and {second} ({report['steps'][1]} steps)")


@episodes.command("merge", summary="append episode ID2's steps to ID1 and remove ID2")
def cmd_merge(
    ctx: typer.Context,
    first: Annotated[str, typer.Argument(metavar="ID1", show_default=False, help="the episode that goes on")],
    second: Annotated[str, typer.Argument(metavar="ID2", show_default=False, help="the episode appended to it")],
    force: Annotated[bool, typer.Option("--force", help="merge episodes of different runs or tasks")] = False,
    as_json: _Json = False,
) -> None:
    from episodelake.lake.ops import edits

    report = edits.merge(_lake(ctx), first, second, force=force)
    _done(report, as_json, f"merged {second} into {first} ({report['steps']} steps)")


@episodes.command("undo", summary="put the episodes an edit touched back as they were before it")
def cmd_undo(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(metavar="JOB_ID", show_default=False,
                                          help="the edit's job id (each edit prints it)")],
    as_json: _Json = False,
) -> None:
    from episodelake.lake.ops import edits

    report = edits.undo(_lake(ctx), job_id)
    _done(report, as_json, f"undid {job_id}: {', '.join(report['episode_ids'])}")


@steps.command("delete", summary="delete steps of an episode; later steps are renumbered down")
def cmd_steps_delete(
    ctx: typer.Context,
    episode_id: Annotated[str, typer.Argument(metavar="ID", show_default=False, help="the episode")],
    numbers: Annotated[str, typer.Option("--steps", metavar="N,M", help="the step numbers, e.g. 3,4")],
    as_json: _Json = False,
) -> None:
    from episodelake.lake.ops import edits
    from episodelake.lake.storage.errors import InvalidInput

    try:
        chosen = [int(n) for n in numbers.split(",") if n.strip()]
    except ValueError:
        raise InvalidInput(f"--steps: give step numbers separated by commas, e.g. 3,4 (not {numbers!r})") from None
    report = edits.delete_steps(_lake(ctx), episode_id, chosen)
    _done(report, as_json, f"deleted step(s) {','.join(map(str, report['steps_deleted']))} of {episode_id}; "
          f"{report['steps']} left, numbered 0..{report['steps'] - 1}")
