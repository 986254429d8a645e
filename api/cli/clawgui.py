"""`elake import|export|watch clawgui`: moving episodes between the lake and ClawGUI folders."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Annotated, Literal

import typer

from episodelake.api.cli.app import Commands, globals_of
from episodelake.collectors.clawgui.importer import (
    DEFAULT_GROUP_WINDOW_MIN,
    GROUP_BY,
    import_clawgui,
    watch_clawgui,
)
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake

GROUP_HELP = (
    "how episodes get their GiGPO/GRPO group id, which ClawGUI folders do not store: "
    "'task-window' (default) groups the episodes of one task created within --window-min minutes "
    "of each other (one training batch); 'task' makes one group per task; 'none' sets no group id "
    "(the trainer then leaves the episodes out). A meta_data.group_id in the folder (written by "
    "`elake export clawgui`) is kept, except with 'none'."
)


GroupBy = Literal[GROUP_BY]  # type: ignore[valid-type]  # a Literal of the importer's tuple of names
GroupByOption = Annotated[GroupBy, typer.Option(help=GROUP_HELP)]
WindowOption = Annotated[float, typer.Option(
    metavar="M", show_default=False, help=f"largest gap in minutes between two episodes of one batch "
    f"(default {DEFAULT_GROUP_WINDOW_MIN:g})")]


def _window(window_min: float) -> float:
    if not (math.isfinite(window_min) and window_min > 0):
        raise InvalidInput(f"--window-min: must be a positive number of minutes, not {window_min:g}")
    return window_min


imports = Commands()
exports = Commands()
watches = Commands()


@imports.command(
    "clawgui", summary="import ClawGUI-RL episode folders (idempotent)",
    description="Import <DIR>/<task>/<episode_id>/episode.json folders. Running it again adds only "
    "what is new. An episode with a bad field is skipped with the reason and the import goes on; a "
    "step whose screenshot is missing, damaged or outside DIR (absolute paths, '..', symlinks) is "
    "kept without it and flagged. Nothing outside DIR is read.")
def cmd_import(
    ctx: typer.Context,
    folder: Annotated[Path, typer.Argument(metavar="DIR", show_default=False,
                                           help="the folder the reference saved episodes to")],
    group_by: GroupByOption = "task-window",
    window_min: WindowOption = DEFAULT_GROUP_WINDOW_MIN,
) -> int:
    report = import_clawgui(Lake(globals_of(ctx).lake), folder, group_by=group_by, window_min=_window(window_min))
    print(report.summary())
    return 0


@exports.command("clawgui", summary="write episodes as ClawGUI-RL episode folders",
                 description="Write <OUT>/<task>/<episode_id>/episode.json + images/ as the reference does.")
def cmd_export(
    ctx: typer.Context,
    out: Annotated[Path, typer.Argument(metavar="OUT", show_default=False, help="folder to write into")],
    where: Annotated[str | None, typer.Option(
        help="SQL condition over the episodes table, e.g. \"success = false\"")] = None,
) -> None:
    from episodelake.lake.export.clawgui import export_clawgui

    n = export_clawgui(Lake(globals_of(ctx).lake, create=False), out, where=where)
    print(f"wrote {n} episode folder(s) to {out}")


@watches.command("clawgui", summary="follow a live training's episode folder and ingest steps as they appear",
                 description="Poll DIR and ingest new episodes and steps until interrupted (Ctrl-C).")
def cmd_watch(
    ctx: typer.Context,
    folder: Annotated[Path, typer.Argument(metavar="DIR", show_default=False, help="the folder to follow")],
    interval: Annotated[float, typer.Option(help="seconds between polls (default 2)", show_default=False)] = 2.0,
    once: Annotated[bool, typer.Option("--once", help="ingest what is there now and stop")] = False,
    group_by: GroupByOption = "task-window",
    window_min: WindowOption = DEFAULT_GROUP_WINDOW_MIN,
) -> None:
    stop = threading.Event()
    print(f"watching {folder} (Ctrl-C to stop)")
    try:
        report = watch_clawgui(Lake(globals_of(ctx).lake), folder, interval_s=interval, once=once, stop=stop,
                               group_by=group_by, window_min=_window(window_min))
    except KeyboardInterrupt:
        stop.set()
        print("stopped")
        return
    print(report.summary())
