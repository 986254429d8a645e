"""The registry of export formats: the extension point for writing a new dataset shape.

Registered formats (each module's docstring is its full description):

- ``llamafactory``: LLaMA-Factory sharegpt JSONL with `<image>` tokens and dataset_info.json
- ``swift``: ms-swift `messages` + `images` JSONL
- ``trl``: TRL vision SFT Parquet, content parts, images embedded
- ``openai``: OpenAI-style chat JSONL, images as data URLs
- ``clawgui``: ClawGUI-RL episode folders

To add one: write a module in this package defining ``FORMAT = ExportFormat(name=...,
summary=..., doc=__doc__, open=...)`` whose `open(ctx)` returns a writer with `write(split,
sample)` and `close() -> [top-level names]` (see `base.py`), add it to `_BUILT_IN` below (or
call `register` from your own package), and list it here; `tests/test_export_formats.py`
checks that every registered format is documented and round-trips through `datasets`.
"""

from __future__ import annotations

from episodelake.lake.export import clawgui, llamafactory, openai, swift, trl
from episodelake.lake.export.base import ExportFormat
from episodelake.lake.export.errors import UnknownFormat

_BUILT_IN = (llamafactory.FORMAT, swift.FORMAT, trl.FORMAT, openai.FORMAT, clawgui.FORMAT)

FORMATS: dict[str, ExportFormat] = {f.name: f for f in _BUILT_IN}


def register(fmt: ExportFormat) -> None:
    """Add a format; a name already taken is refused rather than silently replaced."""
    if fmt.name in FORMATS:
        raise ValueError(f"an export format named {fmt.name!r} is already registered")
    if not fmt.summary.strip() or not (fmt.doc or "").strip():
        raise ValueError(f"export format {fmt.name!r}: summary and doc are required")
    FORMATS[fmt.name] = fmt


def get_format(name: str) -> ExportFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise UnknownFormat(f"format: unknown export format {name!r}; known: {', '.join(FORMATS)}") from None
