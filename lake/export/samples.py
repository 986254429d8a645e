"""SFT samples: chat messages rebuilt from steps with the collectors' own prompt builder.

A step sample is exactly what `episodelake.lake.vocab.prompts.build_messages` gives for that
step (same system prompt, same history lines, same screenshot placement), followed by the
step's recorded response as the assistant turn; an episode sample is the whole episode as
one multi-turn conversation (every screenshot, every response). Until a format writes them,
images stay references: the `image_sha256` of the step, so identical samples hash equal.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from episodelake.lake.export.selection import EpisodeSteps
from episodelake.lake.export.spec import ExportSpec
from episodelake.lake.vocab.prompts import HistoryStep, build_messages, image_placeholder

IMAGE_TOKEN = "<image>"


@dataclass(frozen=True)
class Sample:
    """One training conversation. `messages` are OpenAI-style: system and assistant content is
    text; user content is a list of ``{"type": "text", "text"}`` and ``{"type": "image",
    "image": sha256}`` parts, in the order the model sees them."""

    task: str
    episode_id: str
    step: int | None
    messages: list[dict]
    key: str

    @property
    def images(self) -> list[str]:
        """Each image part's sha256, None for a step without a screenshot."""
        return [part.get("image") for m in self.messages if isinstance(m["content"], list)
                for part in m["content"] if part["type"] == "image"]


def _key(messages: list[dict]) -> str:
    text = json.dumps(messages, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _texts(messages: list[dict]) -> Iterator[str]:
    for m in messages:
        if isinstance(m["content"], str):
            yield m["content"]
        else:
            yield from (p["text"] for p in m["content"] if p["type"] == "text")


def _checked(ep: EpisodeSteps, step: int | None, messages: list[dict], skipped: Counter) -> Sample | None:
    """The sample, or None (counted in `skipped`) when it cannot be trained on faithfully."""
    sample = Sample(ep.task_name, ep.episode_id, step, messages, _key(messages))
    if any(ref is None for ref in sample.images):
        skipped["missing_image"] += 1
        return None
    if any(IMAGE_TOKEN in text for text in _texts(messages)):
        # A literal <image> in the text would break "one token per image" in token formats.
        skipped["image_token_in_text"] += 1
        return None
    return sample


def _history(rows: list[dict]) -> list[HistoryStep]:
    return [HistoryStep.from_step(r, image=r["image_sha256"]) for r in rows]


def step_samples(ep: EpisodeSteps, spec: ExportSpec, skipped: Counter) -> Iterator[Sample]:
    history = _history(ep.steps)  # built once: every later step's prompt shows a window of it
    for index, row in enumerate(ep.steps):
        if row["step"] not in ep.targets:
            continue
        if not row["model_response"]:
            skipped["empty_response"] += 1
            continue
        if not spec.include_invalid and not row["action_valid"]:
            skipped["invalid_action"] += 1
            continue
        start = 0 if spec.history_length is None else max(0, index - spec.history_length)
        messages = build_messages(ep.task_goal, history[start:index],
                                  screenshot=row["image_sha256"], style=spec.style,
                                  history_length=spec.history_images, image_part=image_placeholder)
        messages.append({"role": "assistant", "content": row["model_response"]})
        sample = _checked(ep, row["step"], messages, skipped)
        if sample is not None:
            yield sample


def episode_chunks(length: int, max_images: int | None) -> list[tuple[int, int]]:
    """[start, end) step ranges that split an episode of `length` steps into the fewest
    conversations of at most `max_images` steps, as even as possible (15 steps at 10: 7 + 8,
    not 10 + 5, so no part is left with a short context)."""
    if max_images is None or length <= max_images:
        return [(0, length)]
    parts = -(-length // max_images)
    bounds = [length * k // parts for k in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def episode_sample(ep: EpisodeSteps, spec: ExportSpec, skipped: Counter) -> Iterator[Sample]:
    """The episode as one conversation, or, when it has more steps than `spec.max_images`,
    as consecutive conversations: each one's first user turn lists the steps before it as
    text (the prompt builder's "actions taken before the screenshots below"), and its turns
    are its own steps with their screenshots. Every step is an assistant turn in exactly one
    of them, so training on all assistant turns trains each step once, with the context a
    collector's prompt gives (text history, recent screenshots)."""
    rows = ep.steps
    if any(not r["model_response"] for r in rows):
        skipped["empty_response"] += 1
        return
    if not spec.include_invalid and not all(r["action_valid"] for r in rows):
        skipped["invalid_action"] += 1
        return
    history = _history(rows)
    for start, end in episode_chunks(len(rows), spec.max_images):
        messages = build_messages(ep.task_goal, history[:end - 1], screenshot=rows[end - 1]["image_sha256"],
                                  style=spec.style, history_length=end - 1 - start,
                                  image_part=image_placeholder)
        messages.append({"role": "assistant", "content": rows[end - 1]["model_response"]})
        sample = _checked(ep, None, messages, skipped)
        if sample is not None:
            yield sample


def samples(ep: EpisodeSteps, spec: ExportSpec, skipped: Counter) -> Iterator[Sample]:
    """The episode's samples in step order; the reason for each one left out goes to `skipped`."""
    if not ep.task_goal.strip():
        skipped["missing_goal"] += 1
        return iter(())
    if spec.granularity == "episode":
        return episode_sample(ep, spec, skipped)
    return step_samples(ep, spec, skipped)


def with_image_tokens(messages: list[dict]) -> list[dict]:
    """Messages with text content only, each image part replaced by an `<image>` token.

    Parts are joined with newlines, so the tokens sit where the images were. This is the
    shape LLaMA-Factory and ms-swift read (the images themselves go in a separate list).
    """
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = "\n".join(IMAGE_TOKEN if p["type"] == "image" else p["text"] for p in content)
        out.append({"role": m["role"], "content": content})
    return out
