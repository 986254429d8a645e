"""`elake import|export|watch clawgui`: moving episodes between the lake and ClawGUI folders."""

from __future__ import annotations

import threading
from pathlib import Path

from episodelake.lake.lake import Lake


def register(commands) -> None:
    p = commands.group("import").add_parser(
        "clawgui", help="import ClawGUI-RL episode folders (idempotent)",
        description="Import <DIR>/<task>/<episode_id>/episode.json folders. Running it again "
        "adds only what is new; steps whose screenshot is missing are kept and flagged.")
    p.add_argument("dir", type=Path, help="the folder the reference saved episodes to")
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
    p.set_defaults(func=cmd_watch)


def cmd_import(args) -> int:
    from episodelake.collectors.clawgui import import_clawgui

    report = import_clawgui(Lake(args.lake), args.dir)
    print(report.summary())
    return 0


def cmd_export(args) -> None:
    from episodelake.collectors.clawgui import export_clawgui

    n = export_clawgui(Lake(args.lake, create=False), args.out, where=args.where)
    print(f"wrote {n} episode folder(s) to {args.out}")


def cmd_watch(args) -> None:
    from episodelake.collectors.clawgui import watch_clawgui

    stop = threading.Event()
    print(f"watching {args.dir} (Ctrl-C to stop)")
    try:
        report = watch_clawgui(Lake(args.lake), args.dir, interval_s=args.interval, once=args.once, stop=stop)
    except KeyboardInterrupt:
        stop.set()
        print("stopped")
        return
    print(report.summary())
