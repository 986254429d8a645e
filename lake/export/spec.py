"""`ExportSpec`: everything that decides an export's content, validated in one place.

The spec (less `out`) goes into the manifest, so the same spec on the same lake tag gives the
same bytes. Defaults live here only; the CLI and the API pass through what the user set.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from episodelake.lake.errors import InvalidInput
from episodelake.lake.layout import check_id
from episodelake.lake.prompts import STYLES

GRANULARITIES = ("step", "episode")


@dataclass(frozen=True)
class ExportSpec:
    #: A registered format name (see `episodelake.lake.export.formats.FORMATS`).
    format: str
    #: The folder to write; created, or replaced when an earlier export wrote it.
    out: Path
    #: A set's name or id: only its live members are exported.
    set: str | None = None
    #: A SQL condition over `episodes JOIN steps USING (episode_id)` (columns of either
    #: table, unqualified or as e.<col> / s.<col>); it picks the steps that become samples.
    where: str | None = None
    #: Keep episodes whatever their outcome (default: only `success = true`).
    include_failed: bool = False
    #: Keep only target steps whose judge's step_reward is 1 (history keeps every step).
    good_steps_only: bool = False
    #: Keep target steps whose response did not parse into an action (default: skip them).
    include_invalid: bool = False
    #: `step`: one sample per step; `episode`: one multi-turn conversation per episode.
    granularity: str = "step"
    #: Prompt layout from `episodelake.lake.prompts` (`episode` needs `mai-ui`).
    style: str = "mai-ui"
    #: Previous steps shown in a step sample (as text); None shows all, as collectors do.
    history_length: int | None = None
    #: Of those, how many most recent ones also show their screenshot.
    history_images: int = 3
    #: Share of tasks (not samples) held out for validation; no task is in both splits.
    val_fraction: float = 0.1
    #: Seeds the task split: the same seed puts a task in the same split in every export.
    seed: int = 0
    #: Drop samples identical to an earlier one (same text, same image bytes).
    dedup: bool = True
    #: Downscale images above this many pixels (re-encoded then); None copies them as stored.
    max_pixels: int | None = None
    #: Read the lake as of this tag (default: a set's pinned tag, else the latest versions).
    tag: str | None = None
    #: Dataset name used where a format names its dataset (LLaMA-Factory's dataset_info).
    name: str = "episodelake"
    #: Most images in one sample. An episode sample with more steps is split into
    #: consecutive conversations of at most this many steps, each showing the episode's
    #: earlier steps as text (as the collectors' prompts do), so every step is still trained
    #: once; a step sample must fit (its history screenshots plus its own). None: the
    #: format's own limit (openai: 10), else no limit.
    max_images: int | None = None
    #: Write image paths relative to the export folder (portable: move or copy the folder,
    #: then point the training tool at it) instead of absolute (readable from any working
    #: directory, as long as the folder stays where it was exported). Formats that embed
    #: their images (trl, openai) are not affected.
    relative_paths: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        if self.granularity not in GRANULARITIES:
            raise InvalidInput(f"granularity must be one of {', '.join(GRANULARITIES)}, not {self.granularity!r}")
        if self.style not in STYLES:
            raise InvalidInput(f"style must be one of {', '.join(STYLES)}, not {self.style!r}")
        if self.granularity == "episode" and self.style != "mai-ui":
            raise InvalidInput(f"style {self.style!r} is single-turn; granularity 'episode' needs style 'mai-ui'")
        if self.granularity == "episode" and self.good_steps_only:
            raise InvalidInput("good_steps_only picks target steps; use it with granularity 'step'")
        for field in ("history_length", "history_images", "max_pixels", "seed", "max_images"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise InvalidInput(f"{field} must be a non-negative integer, not {value!r}")
        if self.max_pixels is not None and self.max_pixels < 64 * 64:
            raise InvalidInput(f"max_pixels must be at least {64 * 64}, not {self.max_pixels}")
        self._resolve_max_images()
        if not isinstance(self.val_fraction, (int, float)) or not 0 <= self.val_fraction < 1:
            raise InvalidInput(f"val_fraction must be in [0, 1), not {self.val_fraction!r}")
        if self.set is not None and (not isinstance(self.set, str) or not self.set.strip()):
            raise InvalidInput(f"set must be a set's name or id, not {self.set!r}")
        if self.tag is not None:
            check_id(self.tag, "tag")
        check_id(self.name, "name")
        if self.where is not None and not self.where.strip():
            object.__setattr__(self, "where", None)

    def _resolve_max_images(self) -> None:
        """Take the format's image limit when none is given; refuse what breaks either limit."""
        from episodelake.lake.export.formats import FORMATS  # the formats import this module

        fmt = FORMATS.get(self.format)
        limit = fmt.max_images if fmt is not None else None
        if self.max_images is None:
            object.__setattr__(self, "max_images", limit)
        elif self.max_images < 1:
            raise InvalidInput(f"max_images must be at least 1, not {self.max_images}")
        elif limit is not None and self.max_images > limit:
            raise InvalidInput(f"max_images: {self.format} accepts at most {limit} images per "
                               f"sample, not {self.max_images}; use {limit} or less")
        if self.max_images is None or self.granularity != "step":
            return
        shown = self.history_images if self.history_length is None else \
            min(self.history_images, self.history_length)
        if shown + 1 > self.max_images:
            where = f"{self.format} accepts" if self.max_images == limit else "max_images allows"
            raise InvalidInput(
                f"history_images: {shown} history screenshots plus the step's own make "
                f"{shown + 1} images per sample, and {where} at most {self.max_images}; "
                f"use --history-images {self.max_images - 1} or less")

    def recorded(self) -> dict:
        """The spec as the manifest records it (no output path: two folders compare equal)."""
        out = asdict(self)
        out.pop("out")
        return out
