"""`elake export sft`: write an SFT / evaluation dataset out of the lake."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from episodelake.api.cli.app import Commands, globals_of
from episodelake.api.cli.model_options import Fields, with_fields
from episodelake.collectors.jobs.bulk import RayOptions, export_prepare
from episodelake.lake.export.formats import FORMATS, checked
from episodelake.lake.export.spec import ExportSpec

_EPILOG = """examples:

\b
  elake export sft --format llamafactory --out sft-v1
  elake export sft --format trl --set good-runs --tag v1 --out sft-trl
  elake export sft --format openai --where "task_name LIKE 'wifi%' AND step_reward = 1" --out wifi
  elake export sft --list-formats"""

if TYPE_CHECKING:
    FormatName = str
else:  # the registered formats' names, as the choices of `--format`
    FormatName = Literal[tuple(sorted(FORMATS))]

exports = Commands()


@exports.command(
    "sft", summary="export episodes as an SFT / evaluation dataset (LLaMA-Factory, ms-swift, TRL, OpenAI, ClawGUI)",
    description="Export selected steps as training samples built with the collectors' prompt builder. "
    "Default selection: successful episodes. The folder gets a manifest.json; exporting again from "
    "the same tag with the same options gives identical files.", epilog=_EPILOG)
@with_fields(
    Fields(ExportSpec, ("set", "where", "tag", "include_failed", "good_steps_only", "include_invalid"),
           heading="selection"),
    Fields(ExportSpec, ("granularity", "style", "history_length", "history_images", "max_pixels",
                        "max_images"), heading="samples"),
    Fields(ExportSpec, ("val_fraction", "seed", "dedup", "dedupe_similar", "name", "relative_paths"), heading="output"),
    Fields(ExportSpec, ("redact", "redact_config", "redact_missing"), heading="redaction"),
    Fields(RayOptions, heading="cluster"),
)
def cmd_export_sft(
    ctx: typer.Context,
    given: dict[str, Any],
    format: Annotated[FormatName | None, typer.Option(
        help=ExportSpec.model_fields["format"].description)] = None,
    out: Annotated[Path | None, typer.Option(help=ExportSpec.model_fields["out"].description)] = None,
    list_formats: Annotated[bool, typer.Option("--list-formats", help="describe every format and exit")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the manifest as JSON")] = False,
) -> int:
    from tqdm import tqdm

    from episodelake.lake.export.job import run_export
    from episodelake.lake.storage.errors import InvalidInput
    from episodelake.lake.storage.lake import Lake

    if list_formats:
        for fmt in FORMATS.values():
            print(f"{fmt.name}: {fmt.summary}\n\n{fmt.doc.strip()}\n")
        return 0
    if format is None or out is None:
        missing = "format" if format is None else "out"
        raise InvalidInput(f"--{missing} is required (see `elake export sft --help`)")
    ray = RayOptions(**{name: given.pop(name) for name in RayOptions.model_fields if name in given})
    spec = checked(ExportSpec(format=format, out=out, **given))
    lake = Lake(globals_of(ctx).lake, create=False)
    with tqdm(desc=f"export {spec.format}", unit="episode", disable=as_json or None) as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        result = run_export(lake, spec, progress, prepare=export_prepare(ray))
    if as_json:
        print(json.dumps(result.manifest, indent=2, sort_keys=True))
        return 0
    counts = result.manifest["counts"]
    unit = counts.get("unit", "samples")
    made_from = (f" (made from {sum(counts['step_samples'].values())} step sample(s))"
                 if "step_samples" in counts else "")
    print(f"{result.export_id}: {counts['samples']['train']} train + {counts['samples']['val']} val {unit}"
          f"{made_from} from {counts['episodes']} episode(s), {counts['images']} image(s) -> {result.out}")
    paths = image_paths_note(spec, result.out)
    if paths:
        print(paths)
    if counts["skipped"]:
        print("skipped: " + ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in counts["skipped"].items()),
              file=sys.stderr)
    return 0


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
