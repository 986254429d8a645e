"""`elake export sft`: write an SFT / evaluation dataset out of the lake."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from episodelake.lake.export.formats import FORMATS
from episodelake.lake.export.spec import ExportSpec
from episodelake.lake.spec_model import add_options, given_options

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
    p.add_argument("--format", choices=sorted(FORMATS), help=ExportSpec.model_fields["format"].description)
    p.add_argument("--out", type=Path, help=ExportSpec.model_fields["out"].description)
    p.add_argument("--list-formats", action="store_true", help="describe every format and exit")
    add_options(p.add_argument_group("selection"), ExportSpec,
                only=("set", "where", "tag", "include_failed", "good_steps_only", "include_invalid"))
    add_options(p.add_argument_group("samples"), ExportSpec,
                only=("granularity", "style", "history_length", "history_images", "max_pixels", "max_images"))
    out = p.add_argument_group("output")
    add_options(out, ExportSpec, only=("val_fraction", "seed", "dedup", "name", "relative_paths"))
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
    spec = ExportSpec(**given_options(args, ExportSpec))
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
