"""The ClawGUI-RL episode-folder layout, one reference `save_dir` per split.

``OUT/train/<task>/<episode_id>/episode.json`` + ``images/step_NNNN.png`` (and ``OUT/val/...``),
written by `episodelake.collectors.clawgui.export_clawgui`, exactly as the reference's own
tools read them: whole episodes with every step, image paths absolute as the reference
writes them (so the folder is meant to be read where it was written; `elake import clawgui`
also finds the images of a moved folder beside each episode.json). A step whose screenshot
is lost keeps the path its PNG would have, with no file there (the reference viewer shows
the step without an image; a null path would fail the whole episode); `step_reward` and
`step_reward_reason` are left out when empty, as the reference does; `meta_data.group_id`
carries the episode group back into a re-import. An episode is exported when at least one
of its samples was kept; history options do not apply.
"""

from __future__ import annotations

from episodelake.collectors.clawgui import export_clawgui
from episodelake.lake.export.base import SPLITS, ExportFormat, WriteContext
from episodelake.lake.export.samples import Sample


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class ClawguiWriter:
    def __init__(self, ctx: WriteContext):
        self.ctx = ctx
        self._episodes: dict[str, list[str]] = {}

    def write(self, split: str, sample: Sample) -> None:
        ids = self._episodes.setdefault(split, [])
        if not ids or ids[-1] != sample.episode_id:
            ids.append(sample.episode_id)

    def close(self) -> list[str]:
        written = []
        for split in SPLITS:
            ids = self._episodes.get(split)
            if not ids:
                continue
            where = "episode_id IN (" + ", ".join(_quote(i) for i in ids) + ")"
            export_clawgui(self.ctx.source, self.ctx.out / split, where=where, progress=False)
            written.append(split)
        return written


FORMAT = ExportFormat(
    name="clawgui",
    summary="ClawGUI-RL episode folders (episode.json + images/step_NNNN.png), one per split",
    doc=__doc__,
    open=ClawguiWriter,
)
