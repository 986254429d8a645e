"""ms-swift: its standard `messages` + `images` JSONL.

Each line: ``{"messages": [{"role": ..., "content": "...<image>..."}], "images": [path, ...]}``
with one `<image>` token per image. Image paths are relative to the export folder: start
training from it (``cd OUT && swift sft --dataset train.jsonl --val_dataset val.jsonl ...``).
"""

from __future__ import annotations

from episodelake.lake.export.base import ExportFormat, JsonlWriter
from episodelake.lake.export.samples import Sample, with_image_tokens


class SwiftWriter(JsonlWriter):
    def record(self, sample: Sample) -> dict:
        return {"messages": with_image_tokens(sample.messages),
                "images": [self.ctx.images.file(sha) for sha in sample.images]}


FORMAT = ExportFormat(
    name="swift",
    summary="ms-swift JSONL (messages with <image> tokens + image paths)",
    doc=__doc__,
    open=SwiftWriter,
)
