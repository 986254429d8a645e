"""ms-swift: its standard `messages` + `images` JSONL.

Each line: ``{"messages": [{"role": ..., "content": "...<image>..."}], "images": [path, ...]}``
with one `<image>` token per image. Image paths are absolute, because ms-swift (like
`datasets`) opens a relative path against the working directory, so training starts from
anywhere: ``swift sft --dataset OUT/train.jsonl --val_dataset OUT/val.jsonl ...``. With
``--relative-paths`` they are relative to the export folder (a folder you can move or copy):
then set ``ROOT_IMAGE_DIR=OUT`` (ms-swift joins it to paths that do not exist as given) or
start training from OUT.

ms-swift trains every assistant turn by default. A step sample's earlier turns are the
responses of earlier steps, which are samples of their own: ``--loss_scale last_round``
trains each step once. Keep the default for ``--granularity episode``, whose turns are the
episode's steps.
"""

from __future__ import annotations

from episodelake.lake.export.base import ExportFormat, JsonlWriter
from episodelake.lake.export.samples import Sample, with_image_tokens


class SwiftWriter(JsonlWriter):
    def record(self, sample: Sample) -> dict:
        return {"messages": with_image_tokens(sample.messages),
                "images": [self.ctx.image_path(sha) for sha in sample.images]}


FORMAT = ExportFormat(
    name="swift",
    summary="ms-swift JSONL (messages with <image> tokens + image paths)",
    doc=__doc__,
    open=SwiftWriter,
    image_paths=True,
)
