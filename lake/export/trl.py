"""TRL vision SFT: Parquet with `messages` in content parts and an `images` column, embedded.

Columns: `messages` (list of {role, content: list of {type, text}}; an image part is
``{"type": "image", "text": null}``) and `images` (the screenshots in the order of the
image parts, stored as `datasets` Image values: {bytes, path}). The Parquet schema carries
the `datasets` feature metadata, so ``load_dataset("parquet", data_files=...)`` yields PIL
images and `SFTTrainer` reads it directly. Every content is a list of parts: with plain
string content TRL would put all images before the first user turn, which is wrong for a
screenshot history. The images' bytes are in the file (their `path` is only a name, never
opened), so the dataset loads and trains from any working directory and any machine.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from episodelake.lake.export.base import SPLITS, ExportFormat, WriteContext
from episodelake.lake.export.samples import Sample

ROWS_PER_GROUP = 64

_PART = pa.struct([("type", pa.string()), ("text", pa.string())])
_MESSAGE = pa.struct([("role", pa.string()), ("content", pa.list_(_PART))])
_IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
_STRING = {"dtype": "string", "_type": "Value"}
#: `datasets` features as its Parquet metadata spells them (a JSON list means "list of").
FEATURES = {
    "messages": [{"role": _STRING, "content": [{"type": _STRING, "text": _STRING}]}],
    "images": [{"_type": "Image"}],
}
SCHEMA = pa.schema([("messages", pa.list_(_MESSAGE)), ("images", pa.list_(_IMAGE))],
                   metadata={"huggingface": json.dumps({"info": {"features": FEATURES}})})


def _content(content: str | list[dict]) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [{"type": "image", "text": None} if p["type"] == "image" else {"type": "text", "text": p["text"]}
            for p in content]


class TrlWriter:
    def __init__(self, ctx: WriteContext):
        self.ctx = ctx
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._rows: dict[str, list[dict]] = {}
        self._written: dict[str, int] = {}

    def write(self, split: str, sample: Sample) -> None:
        images = []
        for sha in sample.images:
            data, fmt = self.ctx.images.data(sha)
            images.append({"bytes": data, "path": f"{sha}.{fmt}"})
        messages = [{"role": m["role"], "content": _content(m["content"])} for m in sample.messages]
        rows = self._rows.setdefault(split, [])
        rows.append({"messages": messages, "images": images})
        if len(rows) >= ROWS_PER_GROUP:
            self._flush(split)

    def _flush(self, split: str) -> None:
        rows = self._rows.get(split)
        if not rows:
            return
        writer = self._writers.get(split)
        if writer is None:
            writer = self._writers[split] = pq.ParquetWriter(self.ctx.out / f"{split}.parquet", SCHEMA)
        writer.write_table(pa.Table.from_pylist(rows, schema=SCHEMA))
        self._written[split] = self._written.get(split, 0) + len(rows)
        self._rows[split] = []

    def close(self) -> list[str]:
        for split in list(self._rows):
            self._flush(split)
        for writer in self._writers.values():
            writer.close()
        return [f"{split}.parquet" for split in SPLITS if split in self._writers]

    def records(self) -> dict[str, int]:
        return {split: self._written.get(split, 0) for split in SPLITS}


FORMAT = ExportFormat(
    name="trl",
    summary="TRL vision SFT Parquet: messages with content parts, images embedded (loads with datasets)",
    doc=__doc__,
    open=TrlWriter,
)
