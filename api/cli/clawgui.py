"""`elake import|export|watch clawgui`: moving episodes between the lake and ClawGUI folders."""

from __future__ import annotations

import math
import threading
from pathlib import Path

from episodelake.lake.errors import InvalidInput
from episodelake.lake.lake import Lake

GROUP_HELP = (
    "how episodes get their GiGPO/GRPO group id, which ClawGUI folders do not store: "
    "'task-window' (default) groups the episodes of one task created within --window-min minutes "
    "of each other (one training batch); 'task' makes one group per task; 'none' sets no group id "
    "(the trainer then leaves the episodes out). A meta_data.group_id in the folder (written by "
    "`elake export clawgui`) is kept, except with 'none'."
)


def _group_options(parser) -> None:
    from episodelake.collectors.clawgui.importer import DEFAULT_GROUP_WINDOW_MIN, GROUP_BY

    parser.add_argument("--group-by", choices=GROUP_BY, default="task-window", help=GROUP_HELP)
    parser.add_argument("--window-min", type=float, default=DEFAULT_GROUP_WINDOW_MIN, metavar="M",
                        help=f"largest gap in minutes between two episodes of one batch "
                        f"(default {DEFAULT_GROUP_WINDOW_MIN:g})")


def _window(args) -> float:
    if not (math.isfinite(args.window_min) and args.window_min > 0):
        raise InvalidInput(f"--window-min: must be a positive number of minutes, not {args.window_min:g}")
    return args.window_min


def register(commands) -> None:
    p = commands.group("import").add_parser(
        "clawgui", help="import ClawGUI-RL episode folders (idempotent)",
        description="Import <DIR>/<task>/<episode_id>/episode.json folders. Running it again "
        "adds only what is new. An episode with a bad field is skipped with the reason and the "
        "import goes on; a step whose screenshot is missing, damaged or outside DIR (absolute "
        "paths, '..', symlinks) is kept without it and flagged. Nothing outside DIR is read.")
    p.add_argument("dir", type=Path, help="the folder the reference saved episodes to")
    _group_options(p)
    p.set_defaults(func=cmd_import)

    p = commands.group("export").add_parser(
        "clawgui", help="write episodes as ClawGUI-RL episode folders",
        description="Write <OUT>/<task>/<episode_id>/episode.json + images/ as the reference does.")
    p.add_argument("out", type=Path, help="folder to write into")
    p.add_argument("--where", help="SQL condition over the episodes table, e.g. \"success = false\"")
    p.set_defaults(func=cmd_export)

    p = commands.group("watch").add_parser(
        "clawgui", help="follow a live training's episode folder and ingest steps as they appear",
        description="Poll DIR and ingest new episodes and steps until interrupted (Ctrl-C).")
    p.add_argument("dir", type=Path)
    p.add_argument("--interval", type=float, default=2.0, help="seconds between polls (default 2)")
    p.add_argument("--once", action="store_true", help="ingest what is there now and stop")
    _group_options(p)
    p.set_defaults(func=cmd_watch)


def cmd_import(args) -> int:
    from episodelake.collectors.clawgui.importer import import_clawgui

    report = import_clawgui(Lake(args.lake), args.dir, group_by=args.group_by, window_min=_window(args))
    print(report.summary())
    return 0


def cmd_export(args) -> None:
    from episodelake.lake.export.clawgui import export_clawgui

    n = export_clawgui(Lake(args.lake, create=False), args.out, where=args.where)
    print(f"wrote {n} episode folder(s) to {args.out}")


def cmd_watch(args) -> None:
    from episodelake.collectors.clawgui.importer import watch_clawgui

    stop = threading.Event()
    print(f"watching {args.dir} (Ctrl-C to stop)")
    try:
        report = watch_clawgui(Lake(args.lake), args.dir, interval_s=args.interval, once=args.once, stop=stop,
                               group_by=args.group_by, window_min=_window(args))
    except KeyboardInterrupt:
        stop.set()
        print("stopped")
        return
    print(report.summary())
