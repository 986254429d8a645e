"""`ExportSpec`: everything that decides an export's content, defined and validated once.

`ExportOptions` holds what decides the samples; `ExportSpec` adds where they are written. The
API's request body is `ExportOptions` itself (the server picks the folder), so its OpenAPI
document shows these fields' ranges and descriptions; the command line builds the spec from
the same fields. Defaults live here only. The spec (less `out`) goes into the manifest, so the
same spec on the same lake tag gives the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from episodelake.lake.curation.fields import MAX_NAME
from episodelake.lake.curation.redact import Redactor, RedactRules, load_rules
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.layout import check_id
from episodelake.lake.storage.sql import condition
from episodelake.lake.vocab.prompts import Style
from episodelake.lake.vocab.spec_model import SpecModel

Granularity = Literal["step", "episode"]
RedactMissing = Literal["fail", "skip"]
#: The longest `where` condition accepted (a condition, not a program).
MAX_WHERE = 4000


class ExportOptions(SpecModel):
    """What an export reads from the lake and how it turns steps into samples."""

    # Strict: a number is never taken for a boolean, nor a string for a number.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    format: str = Field(min_length=1, max_length=100,
                        description="a registered format name (GET /api/export-formats, "
                        "`elake export sft --list-formats`)")
    set: str | None = Field(None, min_length=1, max_length=MAX_NAME,
                            description="a set's name or id: only its live members are exported")
    where: str | None = Field(None, max_length=MAX_WHERE,
                              description="a SQL condition over `episodes JOIN steps USING "
                              "(episode_id)` (columns of either table, unqualified or as e.<col> / "
                              "s.<col>), run in the SQL sandbox; it picks the steps that become "
                              "samples")
    include_failed: bool = Field(False, description="keep episodes whatever their outcome "
                                 "(default: only `success = true`)")
    good_steps_only: bool = Field(False, description="keep only target steps whose judge's "
                                  "step_reward is 1 (the history keeps every step)")
    include_invalid: bool = Field(False, description="keep target steps whose response did not "
                                  "parse into an action (default: skip them)")
    granularity: Granularity = Field(
        "step", description="step: one sample per step; episode: one multi-turn conversation "
        "per episode")
    style: Style = Field(
        "mai-ui", description="prompt layout (`episodelake.lake.vocab.prompts`); granularity "
        "episode needs mai-ui")
    history_length: int | None = Field(None, ge=0, le=1000,
                                       description="previous steps shown in a step sample (as "
                                       "text); unset shows all, as collectors do")
    history_images: int = Field(3, ge=0, le=100, description="of those, how many most recent "
                                "ones also show their screenshot")
    max_pixels: int | None = Field(None, ge=64 * 64, le=100_000_000,
                                   description="downscale images above this many pixels "
                                   "(re-encoded then); unset copies them as stored")
    max_images: int | None = Field(None, ge=1, le=1000,
                                   description="most images in one sample. An episode sample "
                                   "with more steps is split into consecutive conversations of at "
                                   "most this many steps, each showing the episode's earlier steps "
                                   "as text (as the collectors' prompts do), so every step is "
                                   "still trained once; a step sample must fit (its history "
                                   "screenshots plus its own). Unset: the format's own limit "
                                   "(openai: 10), else no limit")
    val_fraction: float = Field(0.1, ge=0, lt=1, description="share of tasks (not samples) held "
                                "out for validation; no task is in both splits")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="seeds the task split: the same seed "
                      "puts a task in the same split in every export")
    dedup: bool = Field(True, description="drop samples identical to an earlier one (same text, "
                        "same image bytes)")
    dedupe_similar: float | None = Field(
        None, ge=0, le=2, description="drop a step whose screenshot's embedding lies within this "
        "distance (0: the same screen; at most 2) of a step already kept for the same task, so "
        "near-duplicate screens are trained once; needs `elake enrich --what embed`; granularity "
        "step only")
    tag: str | None = Field(None, max_length=200, description="read the lake as of this tag "
                            "(default: a set's pinned tag, else the latest versions)")
    name: str = Field("episodelake", min_length=1, max_length=200,
                      description="dataset name, where a format names its dataset "
                      "(LLaMA-Factory's dataset_info)")
    redact: bool = Field(False, description="mask, in the exported images, every screen text line "
                         "(the steps' OCR text: `elake enrich --what ocr`) that a redaction rule "
                         "matches (phone numbers, e-mail addresses, card numbers; names and "
                         "patterns from --redact-config) with a solid box, and every match in "
                         "the samples' text (goal, response, action text) with [REDACTED]; the "
                         "lake keeps the originals and manifest.json lists each masked region by "
                         "rule and box, and each masked text by episode, step, field and rule")
    redact_missing: RedactMissing = Field(
        "fail", description="with redact, a screenshot that has no OCR text cannot be checked: "
        "fail refuses the export (naming how many and the command that adds the text), skip "
        "leaves out the samples that show one")
    redact_rules: RedactRules | None = Field(None, description="the redaction rules (default: "
                                             "phone, email and card)")

    def redactor(self) -> Redactor | None:
        """The compiled redaction rules when the export redacts, else None."""
        return (self.redact_rules or RedactRules()).redactor() if self.redact else None

    @model_validator(mode="after")
    def _check(self) -> ExportOptions:
        """Combinations no single field can refuse; each message names the field to change."""
        if self.granularity == "episode" and self.style != "mai-ui":
            raise InvalidInput(f"style {self.style!r} is single-turn; granularity 'episode' needs style 'mai-ui'")
        if self.granularity == "episode" and self.dedupe_similar is not None:
            raise InvalidInput("dedupe_similar drops target steps; use it with granularity 'step'")
        if self.granularity == "episode" and self.good_steps_only:
            raise InvalidInput("good_steps_only picks target steps; use it with granularity 'step'")
        if self.set is not None and not self.set.strip():
            raise InvalidInput(f"set must be a set's name or id, not {self.set!r}")
        if self.tag is not None:
            check_id(self.tag, "tag")
        check_id(self.name, "name")
        if self.where is not None and not self.where.strip():
            object.__setattr__(self, "where", None)
        if self.where is not None:
            condition(self.where, "where")  # refused here, before a job starts
        if not self.redact and (self.redact_rules is not None or self.redact_missing != "fail"):
            name = "redact_rules" if self.redact_rules is not None else "redact_missing"
            raise InvalidInput(f"{name}: says how to redact, but redact is off; set redact (--redact)")
        return self

class ExportSpec(ExportOptions):
    """An export: its options and the folder it writes."""

    out: Path = Field(strict=False, description="the folder to write; created, or replaced when "
                      "an earlier export wrote it")
    relative_paths: bool = Field(False, description="write image paths relative to the export "
                                 "folder (portable: move or copy the folder, then point the "
                                 "training tool at it) instead of absolute (readable from any "
                                 "working directory, as long as the folder stays where it was "
                                 "exported). Formats that embed their images (trl, openai) are "
                                 "not affected")
    redact_config: Path | None = Field(None, strict=False, description="a TOML or JSON file of "
                                       "redaction rules: phone, email, card (true or false), "
                                       "names (a list of people's names), patterns (rule name = "
                                       "regular expression)")

    @model_validator(mode="after")
    def _rules_file(self) -> ExportSpec:
        """Read the rules file into `redact_rules`, so every path after this sees one rule set."""
        if self.redact_config is None:
            return self
        if not self.redact:
            raise InvalidInput("redact_config: rules given but redact is off; add --redact")
        if self.redact_rules is not None:
            raise InvalidInput("redact_config: give the rules as a file or as redact_rules, not both")
        object.__setattr__(self, "redact_rules", load_rules(self.redact_config))
        return self

    def recorded(self) -> dict:
        """The spec as the manifest records it (no output path: two folders compare equal;
        the redaction rules by name and digest: a list of names is itself personal data)."""
        recorded = self.model_dump(exclude={"out", "redact_config", "redact_rules"})
        recorded["redact_rules"] = (self.redact_rules or RedactRules()).recorded() if self.redact else None
        return recorded
