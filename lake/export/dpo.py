"""Preference pairs (DPO) from anchor states: two steps taken from the same screen of the same task.

Each line: ``{"prompt": [...], "chosen": [{"role": "assistant", "content": [...]}],
"rejected": [{"role": "assistant", ...}], "images": [path, ...], "task", "anchor_key",
"group_id", "chosen_from": {"episode_id", "step", "success", "step_reward"},
"rejected_from": {...}}``: TRL's conversational preference format for vision models
(`DPOTrainer`), every content a list of ``{"type": "text", "text"}`` and ``{"type":
"image"}`` parts, the images listed in the order of their parts (paths, as ms-swift's lines
name them; ``datasets.Image()`` or `load_dataset("json")` plus a cast opens them).

Pairs only this lake can form: the two steps share the episode group (`group_id`: same task,
same batch), the anchor state (`anchor_key`: the same screen, up to the status bar) and the
task, come from different episodes and took different actions. The rule: **chosen outranks
rejected** when its episode succeeded and the rejected one's did not, or, when both
episodes have the same outcome, when the judge gave the chosen step a higher `step_reward`
(a missing reward counts as 0). Every pair meeting the rule is written, once per ordered
(chosen, rejected) of target steps kept by the export. The prompt is the chosen step's own
(its history and screenshots, as an SFT sample of that step shows them); `rejected` is the
other step's response, taken at the same screen. Failed episodes are only read with
``--include-failed`` (add ``--include-invalid`` to pair against actions that did not parse).

Branches (`elake branch`) pair by construction: a branch's step K was taken on its parent's
screen at K, in the parent's group, so it pairs with the parent's step K and the other
branches'. Its replayed steps before K are the parent's and pair with nothing (the parent's
own rows do).

Only step samples pair (``--granularity step``); a step without an anchor key (`elake enrich
--what phash` fills them) pairs with nothing. With ``--redact``, the text and images are
masked as in every other format.
"""

from __future__ import annotations

from dataclasses import dataclass

from episodelake.lake.export.base import SPLITS, ExportFormat, WriteContext, dumps
from episodelake.lake.export.samples import Sample
from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import InvalidInput

#: Step and episode columns the pairing reads (beside the sample itself).
FACT_COLUMNS = schema.pick("steps", ["step", "anchor_key", "step_reward", "step_reward_reason", "action_type",
                                     "action"])


def step_facts(ctx: WriteContext, episode_id: str) -> tuple[dict, dict[int, dict]]:
    """(the episode row's group_id and success, its steps' anchor key, judge verdict and
    action by step number), read from the export's lake view."""
    episode = ctx.source.episode(episode_id)
    steps = {row["step"]: row for row in ctx.source.steps(episode_id, columns=FACT_COLUMNS).to_pylist()}
    return {"group_id": episode["group_id"], "success": episode["success"],
            "branch_step": episode.get("branch_step")}, steps


def parts(content: str | list[dict]) -> list[dict]:
    """Content as TRL's vision formats read it: a list of text and image parts."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [{"type": "image"} if p["type"] == "image" else {"type": "text", "text": p["text"]} for p in content]


def conversation(messages: list[dict]) -> list[dict]:
    return [{"role": m["role"], "content": parts(m["content"])} for m in messages]


class EpisodeFacts:
    """Caches the current episode's facts: the export writes one episode's samples in a row."""

    def __init__(self, ctx: WriteContext):
        self.ctx = ctx
        self._episode_id: str | None = None
        self._facts: tuple[dict, dict[int, dict]] = ({}, {})

    def of(self, sample: Sample) -> tuple[dict, dict]:
        if sample.step is None:
            raise InvalidInput(f"granularity: the {self.ctx.spec.format} format is made of steps; "
                               "export it with --granularity step")
        if sample.episode_id != self._episode_id:
            self._facts = step_facts(self.ctx, sample.episode_id)
            self._episode_id = sample.episode_id
        episode, steps = self._facts
        return episode, steps[sample.step]


@dataclass(frozen=True)
class Candidate:
    """A written step sample waiting for its pairs."""

    task: str
    episode_id: str
    step: int
    group_id: str
    anchor_key: str
    success: bool
    step_reward: float
    action: tuple[str | None, str | None]
    prompt: list[dict]
    response: list[dict]
    images: list[str]

    def source(self) -> dict:
        return {"episode_id": self.episode_id, "step": self.step, "success": self.success,
                "step_reward": self.step_reward}


def outranks(a: Candidate, b: Candidate) -> bool:
    """The module's rule: success first, then the judge's step reward."""
    if a.success != b.success:
        return a.success
    return a.step_reward > b.step_reward


def pairs(candidates: list[Candidate]) -> list[tuple[Candidate, Candidate]]:
    """Every (chosen, rejected) of the same group, anchor state and task, from different
    episodes, with different actions, chosen outranking rejected; in a fixed order."""
    groups: dict[tuple[str, str, str], list[Candidate]] = {}
    for c in candidates:
        groups.setdefault((c.group_id, c.anchor_key, c.task), []).append(c)
    out = []
    for key in sorted(groups):
        members = sorted(groups[key], key=lambda c: (c.episode_id, c.step))
        for chosen in members:
            for rejected in members:
                if (chosen.episode_id != rejected.episode_id and chosen.action != rejected.action
                        and outranks(chosen, rejected)):
                    out.append((chosen, rejected))
    return out


class DpoWriter:
    def __init__(self, ctx: WriteContext):
        self.ctx = ctx
        self.facts = EpisodeFacts(ctx)
        self._candidates: dict[str, list[Candidate]] = {}
        self._pairs: dict[str, int] = {}

    def write(self, split: str, sample: Sample) -> None:
        episode, step = self.facts.of(sample)
        if not step["anchor_key"] or not episode["group_id"]:
            return
        if episode["branch_step"] is not None and step["step"] < episode["branch_step"]:
            return  # a branch's replayed step: the parent's own row pairs
        self._candidates.setdefault(split, []).append(Candidate(
            sample.task, sample.episode_id, step["step"], episode["group_id"], step["anchor_key"],
            bool(episode["success"]), float(step["step_reward"] or 0.0),
            (step["action_type"], step["action"]), conversation(sample.messages[:-1]),
            conversation(sample.messages[-1:]), [self.ctx.image_path(sha) for sha in sample.images]))

    def close(self) -> list[str]:
        written = []
        for split in SPLITS:
            found = pairs(self._candidates.get(split, []))
            if not found:
                continue
            with open(self.ctx.out / f"{split}.jsonl", "wb") as fh:
                for chosen, rejected in found:
                    record = {"prompt": chosen.prompt, "chosen": chosen.response,
                              "rejected": rejected.response, "images": chosen.images,
                              "task": chosen.task, "anchor_key": chosen.anchor_key,
                              "group_id": chosen.group_id, "chosen_from": chosen.source(),
                              "rejected_from": rejected.source()}
                    fh.write((dumps(record) + "\n").encode("utf-8"))
            self._pairs[split] = len(found)
            written.append(f"{split}.jsonl")
        if not written:
            raise InvalidInput("dpo: no two selected steps share a group, an anchor state and a task "
                               "with one outranking the other; add --include-failed, or fill anchor "
                               "keys with `elake enrich --what phash`")
        return written

    def records(self) -> dict[str, int]:
        """Pairs per split: what the files hold (the steps fed in are many more)."""
        return {split: self._pairs.get(split, 0) for split in SPLITS}


FORMAT = ExportFormat(
    name="dpo",
    summary="TRL DPO pairs JSONL: chosen and rejected steps from the same anchor state (prompt, chosen, rejected, images)",
    doc=__doc__,
    open=DpoWriter,
    image_paths=True,
    unit="pairs",
)
