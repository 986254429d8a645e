"""LLaMA-Factory: sharegpt-style `messages` + `images`, and the dataset_info.json it needs.

Each line: ``{"messages": [{"role": "system"|"user"|"assistant", "content": "...<image>..."}],
"images": ["/abs/OUT/images/ab/ab....png", ...]}``; one `<image>` token per image, in order.
Train with ``llamafactory-cli train ... --dataset_dir OUT --dataset NAME_train``.

Image paths are absolute, so they open whatever LLaMA-Factory's `media_dir` is (it joins a
path to `media_dir`, and joining an absolute path gives the path itself). With
``--relative-paths`` they are relative to the export folder: LLaMA-Factory finds them when
`media_dir` is OUT, which it is by default when `dataset_dir` is OUT (its default
`media_dir` is `dataset_dir`); if you copy the entries of dataset_info.json into another
dataset_dir, also pass ``--media_dir OUT``.

LLaMA-Factory's default ``mask_history: false`` trains every assistant turn of a
multi-turn sample, not only the last. A step sample's earlier turns are the responses of
earlier steps, which are samples of their own, so with the default each is trained once
as the target and again in up to ``--history-images`` later samples: set
``mask_history: true`` for step samples. Keep the default for ``--granularity episode``,
whose turns are the episode's steps, each trained once.
"""

from __future__ import annotations

import json
from dataclasses import replace

from episodelake.lake.export import swift

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


class LlamaFactoryWriter(swift.SwiftWriter):
    """ms-swift's lines, which LLaMA-Factory's sharegpt loader reads as they are, and the
    dataset_info.json that names them."""

    def close(self) -> list[str]:
        files = super().close()
        info = dataset_info(self.ctx.spec.name, files)
        (self.ctx.out / DATASET_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        return [*files, DATASET_INFO]


FORMAT = replace(
    swift.FORMAT,
    name="llamafactory",
    summary="LLaMA-Factory sharegpt JSONL (messages + images, <image> tokens) with dataset_info.json",
    doc=__doc__,
    open=LlamaFactoryWriter,
)
