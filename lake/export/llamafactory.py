"""LLaMA-Factory: sharegpt-style `messages` + `images`, and the dataset_info.json it needs.

Each line: ``{"messages": [{"role": "system"|"user"|"assistant", "content": "...<image>..."}],
"images": ["images/ab/ab....png", ...]}``; one `<image>` token per image, in order. Paths are
relative to the export folder, which is both LLaMA-Factory's `dataset_dir` and (by default)
its `media_dir`: ``llamafactory-cli train ... --dataset_dir OUT --dataset NAME_train``.
"""

from __future__ import annotations

import json

from episodelake.lake.export.base import ExportFormat, JsonlWriter
from episodelake.lake.export.samples import Sample, with_image_tokens

DATASET_INFO = "dataset_info.json"
TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user",
        "assistant_tag": "assistant", "system_tag": "system"}


def dataset_info(name: str, files: list[str]) -> dict:
    """One sharegpt entry per split file, named `<name>_<split>`."""
    return {f"{name}_{file.split('.')[0]}": {
        "file_name": file,
        "formatting": "sharegpt",
        "columns": {"messages": "messages", "images": "images"},
        "tags": TAGS,
    } for file in files}


class LlamaFactoryWriter(JsonlWriter):
    def record(self, sample: Sample) -> dict:
        return {"messages": with_image_tokens(sample.messages),
                "images": [self.ctx.images.file(sha) for sha in sample.images]}

    def close(self) -> list[str]:
        files = super().close()
        info = dataset_info(self.ctx.spec.name, files)
        (self.ctx.out / DATASET_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        return [*files, DATASET_INFO]


FORMAT = ExportFormat(
    name="llamafactory",
    summary="LLaMA-Factory sharegpt JSONL (messages + images, <image> tokens) with dataset_info.json",
    doc=__doc__,
    open=LlamaFactoryWriter,
)
