"""The registry of export formats: the extension point for writing a new dataset shape.

Registered formats (each module's docstring is its full description):

- ``llamafactory``: LLaMA-Factory sharegpt JSONL with `<image>` tokens and dataset_info.json
- ``swift``: ms-swift `messages` + `images` JSONL
- ``trl``: TRL vision SFT Parquet, content parts, images embedded
- ``openai``: OpenAI-style chat JSONL, images as data URLs
- ``clawgui``: ClawGUI-RL episode folders
- ``dpo``: TRL DPO pairs of steps from the same anchor state, chosen outranking rejected
- ``prm``: every step with the judge's verdict and reason (TRL prompt/completion/label)

To add one: write a module in this package defining ``FORMAT = ExportFormat(name=...,
summary=..., doc=__doc__, open=...)`` whose `open(ctx)` returns a writer with `write(split,
sample)` and `close() -> [top-level names]` (see `base.py`), add it to `_BUILT_IN` below (or
call `register` from your own package), and list it here; `tests/lake/export/test_export_formats.py`
checks that every registered format is documented and round-trips through `datasets`.
"""

from __future__ import annotations

from typing import TypeVar

from episodelake.lake.export import clawgui, dpo, llamafactory, openai, prm, swift, trl
from episodelake.lake.export.base import ExportFormat
from episodelake.lake.export.errors import UnknownFormat
from episodelake.lake.export.spec import ExportOptions
from episodelake.lake.storage.errors import InvalidInput

Options = TypeVar("Options", bound=ExportOptions)

_BUILT_IN = (llamafactory.FORMAT, swift.FORMAT, trl.FORMAT, openai.FORMAT, clawgui.FORMAT, dpo.FORMAT,
             prm.FORMAT)

FORMATS: dict[str, ExportFormat] = {f.name: f for f in _BUILT_IN}


def register(fmt: ExportFormat) -> None:
    """Add a format; a name already taken is refused rather than silently replaced."""
    if fmt.name in FORMATS:
        raise InvalidInput(f"an export format named {fmt.name!r} is already registered")
    if not fmt.summary.strip() or not (fmt.doc or "").strip():
        raise InvalidInput(f"export format {fmt.name!r}: summary and doc are required")
    FORMATS[fmt.name] = fmt


def get_format(name: str) -> ExportFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise UnknownFormat(f"format: unknown export format {name!r}; known: {', '.join(FORMATS)}") from None


def checked(options: Options) -> Options:
    """`options` fitted to their format: its image limit taken when none is given, and what the
    format cannot do refused, naming the option to change.

    The spec checks what its own fields decide; this checks what depends on the format, and
    lives beside the registry so the spec never imports the formats that are built on it.
    `run_export` applies it; the API and the command line apply it first, so a refusal is the
    request's error. An unknown format passes here and is refused by `get_format`."""
    fmt = FORMATS.get(options.format)
    if fmt is None:
        return options
    if options.redact and not fmt.redacts:
        redacting = ", ".join(name for name, f in FORMATS.items() if f.redacts)
        raise InvalidInput(f"redact: the {options.format} format writes episodes as stored, so it "
                           f"cannot mask them; export one of {redacting} with --redact")
    limit, wanted = fmt.max_images, options.max_images
    if wanted is not None and limit is not None and wanted > limit:
        raise InvalidInput(f"max_images: {options.format} accepts at most {limit} images per "
                           f"sample, not {wanted}; use {limit} or less")
    max_images = limit if wanted is None else wanted
    if max_images is not None and options.granularity == "step":
        shown = options.history_images if options.history_length is None else \
            min(options.history_images, options.history_length)
        if shown + 1 > max_images:
            where = f"{options.format} accepts" if max_images == limit else "max_images allows"
            raise InvalidInput(
                f"history_images: {shown} history screenshots plus the step's own make "
                f"{shown + 1} images per sample, and {where} at most {max_images}; "
                f"use --history-images {max_images - 1} or less")
    return options if max_images == wanted else options.model_copy(update={"max_images": max_images})
