"""What an export format is: a named writer of samples into a folder.

A format gets a `WriteContext` (the folder, the spec, the image store, the lake view read)
and returns a `FormatWriter`; the export job feeds it every kept sample with its split, in a
fixed order, then closes it. Writers must be deterministic: no timestamps, no random names,
no dict-order surprises, so that the same lake tag and spec give byte-identical files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from episodelake.lake.export.images import ImageStore
from episodelake.lake.export.samples import Sample
from episodelake.lake.export.spec import ExportSpec
from episodelake.lake.storage.lake import Lake

SPLITS = ("train", "val")


@dataclass(frozen=True)
class WriteContext:
    out: Path
    spec: ExportSpec
    images: ImageStore
    source: Lake

    def image_path(self, sha: str) -> str:
        """The path a sample names for an image, writing its file the first time: absolute by
        default, because ms-swift and `datasets` open a relative path against the working
        directory, not the dataset's folder; relative to the folder with `relative_paths`."""
        rel = self.images.file(sha)
        return rel if self.spec.relative_paths else str(self.out.absolute() / rel)


class FormatWriter(Protocol):
    def write(self, split: str, sample: Sample) -> None:
        """Add one sample to `split` ("train" or "val")."""

    def close(self) -> list[str]:
        """Finish the files; returns the top-level names written under the folder."""

    def records(self) -> dict[str, int]:
        """After `close`: how many records (in the format's `unit`) each split's files hold.
        The manifest, the console line and the lineage row count these, never the samples
        fed in (a `dpo` writer gets steps and writes pairs)."""


@dataclass(frozen=True)
class ExportFormat:
    """A registered format. `summary` is one line (CLI help); `doc` says what the folder
    holds and how the target tool reads it (shown by `elake export formats`)."""

    name: str
    summary: str
    doc: str
    open: Callable[[WriteContext], FormatWriter]
    #: Most images the target tool accepts in one sample (None: no limit); longer episode
    #: samples are split to fit (see `ExportSpec.max_images`).
    max_images: int | None = None
    #: Whether samples name image files (then `relative_paths` decides how) or embed them.
    image_paths: bool = False
    #: Whether the format writes only what samples and the image store give it, which a
    #: redacting export masks; a format that copies stored episodes as they are cannot redact.
    redacts: bool = True
    #: What one record of the format's files is, as counts name it: "samples" (one
    #: conversation per line or row), "pairs" (dpo), "episodes" (clawgui's folders).
    unit: str = "samples"


def dumps(record: object) -> str:
    """One JSON line: UTF-8 as is, keys in the order built, no spaces that vary."""
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": "))


class JsonlWriter:
    """`train.jsonl` / `val.jsonl`, each opened on its first sample; `record` makes the line."""

    def __init__(self, ctx: WriteContext):
        self.ctx = ctx
        self._files: dict[str, IO[bytes]] = {}
        self._lines: dict[str, int] = {}

    def record(self, sample: Sample) -> dict:
        raise NotImplementedError

    def line(self, sample: Sample) -> str:
        return dumps(self.record(sample))

    def write(self, split: str, sample: Sample) -> None:
        fh = self._files.get(split)
        if fh is None:
            fh = self._files[split] = open(self.ctx.out / f"{split}.jsonl", "wb")
        fh.write((self.line(sample) + "\n").encode("utf-8"))
        self._lines[split] = self._lines.get(split, 0) + 1

    def close(self) -> list[str]:
        for fh in self._files.values():
            fh.close()
        return [f"{split}.jsonl" for split in SPLITS if split in self._files]

    def records(self) -> dict[str, int]:
        return {split: self._lines.get(split, 0) for split in SPLITS}
