"""`elake export sft`: write an SFT / evaluation dataset out of the lake."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from episodelake.lake.export.formats import FORMATS
from episodelake.lake.export.spec import GRANULARITIES, ExportSpec

_EPILOG = """examples:
  elake export sft --format llamafactory --out sft-v1
  elake export sft --format trl --set good-runs --tag v1 --out sft-trl
  elake export sft --format openai --where "task_name LIKE 'wifi%' AND step_reward = 1" --out wifi
  elake export sft --list-formats"""


def register(commands) -> None:
    p = commands.group("export").add_parser(
        "sft", help="export episodes as an SFT / evaluation dataset (LLaMA-Factory, ms-swift, TRL, OpenAI, ClawGUI)",
        description="Export selected steps as training samples built with the collectors' prompt "
        "builder. Default selection: successful episodes. The folder gets a manifest.json; "
        "exporting again from the same tag with the same options gives identical files.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--format", choices=sorted(FORMATS), help="dataset format")
    p.add_argument("--out", type=Path, help="output folder (new, empty, or an earlier export's)")
    p.add_argument("--list-formats", action="store_true", help="describe every format and exit")
    sel = p.add_argument_group("selection")
    sel.add_argument("--set", help="a set's name or id: export its members")
    sel.add_argument("--where", help="SQL condition over episodes JOIN steps (picks the target steps)")
    sel.add_argument("--tag", help="read the lake as of this tag (default: the set's pinned tag, else latest)")
    sel.add_argument("--include-failed", action="store_true", help="keep episodes that did not succeed")
    sel.add_argument("--good-steps-only", action="store_true", help="only steps whose step_reward is 1")
    sel.add_argument("--include-invalid", action="store_true", help="keep steps whose action did not parse")
    smp = p.add_argument_group("samples")
    smp.add_argument("--granularity", choices=GRANULARITIES, default="step",
                     help="one sample per step, or one conversation per episode (default step)")
    smp.add_argument("--style", choices=("mai-ui", "gui-owl"), default="mai-ui", help="prompt layout (default mai-ui)")
    smp.add_argument("--history-length", type=int, metavar="K",
                     help="previous steps shown per sample (default: all, as collectors do)")
    smp.add_argument("--history-images", type=int, default=3, metavar="N",
                     help="how many of them show their screenshot (default 3)")
    smp.add_argument("--max-pixels", type=int, help="downscale larger images (re-encodes them)")
    smp.add_argument("--max-images", type=int, metavar="N",
                     help="most images in one sample: longer episodes become consecutive "
                     "conversations, earlier steps as text (default: the format's limit, "
                     "openai 10; else none)")
    out = p.add_argument_group("output")
    out.add_argument("--val-fraction", type=float, default=0.1, help="share of tasks held out (default 0.1)")
    out.add_argument("--seed", type=int, default=0, help="seed of the task split (default 0)")
    out.add_argument("--no-dedup", action="store_true", help="keep identical samples")
    out.add_argument("--name", default="episodelake", help="dataset name in dataset_info.json")
    out.add_argument("--relative-paths", action="store_true",
                     help="image paths relative to the export folder (movable; the training tool "
                     "must resolve them against it) instead of absolute (work from any directory)")
    out.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.set_defaults(func=cmd_export_sft)


def image_paths_note(spec: ExportSpec, out: Path) -> str | None:
    """How the samples name their images, and what the training tool then needs; None for
    formats that embed the images."""
    if not FORMATS[spec.format].image_paths:
        return None
    if not spec.relative_paths:
        return (f"image paths: absolute (under {out}/images): training can start from any "
                "directory; keep the folder where it is, or export again with --relative-paths")
    hint = {"swift": f"set ROOT_IMAGE_DIR={out} or start training from that folder",
            "llamafactory": f"use --dataset_dir {out} (its media_dir defaults to it) or --media_dir {out}"}
    return (f"image paths: relative to {out}: "
            + hint.get(spec.format, "resolve them against that folder"))


def cmd_export_sft(args) -> int:
    from tqdm import tqdm

    from episodelake.lake.errors import InvalidInput
    from episodelake.lake.export.job import run_export
    from episodelake.lake.lake import Lake

    if args.list_formats:
        for fmt in FORMATS.values():
            print(f"{fmt.name}: {fmt.summary}\n\n{fmt.doc.strip()}\n")
        return 0
    for flag in ("format", "out"):
        if getattr(args, flag) is None:
            raise InvalidInput(f"--{flag} is required (see `elake export sft --help`)")
    spec = ExportSpec(
        format=args.format, out=args.out, set=args.set, where=args.where, tag=args.tag,
        include_failed=args.include_failed, good_steps_only=args.good_steps_only,
        include_invalid=args.include_invalid, granularity=args.granularity, style=args.style,
        history_length=args.history_length, history_images=args.history_images,
        max_pixels=args.max_pixels, val_fraction=args.val_fraction, seed=args.seed,
        dedup=not args.no_dedup, name=args.name, max_images=args.max_images,
        relative_paths=args.relative_paths)
    lake = Lake(args.lake, create=False)
    with tqdm(desc=f"export {spec.format}", unit="episode", disable=args.json or None) as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        result = run_export(lake, spec, progress)
    if args.json:
        print(json.dumps(result.manifest, indent=2, sort_keys=True))
        return 0
    counts = result.manifest["counts"]
    print(f"{result.export_id}: {counts['samples']['train']} train + {counts['samples']['val']} val sample(s) "
          f"from {counts['episodes']} episode(s), {counts['images']} image(s) -> {result.out}")
    paths = image_paths_note(spec, result.out)
    if paths:
        print(paths)
    if counts["skipped"]:
        print("skipped: " + ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in counts["skipped"].items()),
              file=sys.stderr)
    return 0
