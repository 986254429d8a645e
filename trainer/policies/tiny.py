"""TinyPolicy: a small torch network that acts on the simulated phone and learns on a CPU.

Inputs: the screenshot downsampled to 36x120 greyscale, the goal as a hashed bag of words
and word pairs, the history as the step number and the counts of the actions taken, and
each goal word paired with the step number (a lookup straight to the action's logits).
Outputs, read as one structured action:

- an action *verb* (click, long press, four swipes, type, open, back, home, enter, wait,
  terminate);
- for click and long press, a cell of a 9x30 grid over the screen: a heat map from the
  convolutional features (modulated by the goal, FiLM-style) plus a goal-conditioned prior
  that is a row term plus a column term;
- for type, one of the goal's word spans (quoted text first): the span is scored by its
  context in the goal (the words around it, its length, whether it is quoted), so a value
  never seen in training is typed where its context says;
- for open, the app the goal names when it names one (a pointer, so an app never opened in
  training is opened by name), else the app the network prefers for the goal and screen.

The action is written as MAI-UI tool-call text (`format_tool_call`), so it travels through
the same parser, recorder and lake as a VLM's response. To learn, the recorded response is
parsed back to its structured choice and scored as two "tokens", log p(verb) and
log p(argument | verb), each with its own PPO ratio (see `SmallPolicy.score` in
:mod:`.small`, which holds what this policy shares with the screen policy).
"""

from __future__ import annotations

import io
import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from episodelake.collectors.envs.suites import get_suite
from episodelake.collectors.loop import Observation
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.action_space import GRID
from episodelake.trainer.policies.base import Sample
from episodelake.trainer.policies.small import (
    POINT_VERBS,
    VERBS,
    SmallPolicy,
    Span,
    offsets,
    read_response,
    verb_of,
)

IMAGE_W, IMAGE_H = 36, 120
#: 9 x 30 cells of 120 x 80 logical pixels: a cell centre lands on any control at least that
#: size (the settings switches are 150 x 84).
GRID_W, GRID_H = 9, 30
CELLS = GRID_W * GRID_H
STEP_BUCKETS = 16
#: Initial logit offsets of the verbs: most GUI steps are taps, so a fresh policy taps about
#: 6 times in 10 and spreads the rest over the other verbs.
VERB_PRIOR = {"click": 3.0}
#: Initial logit of the app the goal names, against 0 for the others: "Open the Shop app"
#: opens Shop about 9 times in 10 from the start, also for apps never seen in training.
APP_NAMED_PRIOR = 4.0
#: Longest goal span offered as text to type (quoted text is offered whole).
MAX_SPAN_WORDS = 4
#: Steps, verbs counted so far, and the previous verb, as one vector.
HISTORY_DIM = STEP_BUCKETS + 2 * (len(VERBS) + 1)

CONFIG_FILE = "tiny_policy.json"

_WORD = re.compile(r"[a-z0-9]+")
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”")
_EDGE_PUNCTUATION = ".,;:!?\"'“”()"


@dataclass(frozen=True)
class TinyConfig:
    """The network's shape; saved next to the weights."""

    #: the apps `open` can name: the task suite's (the default suite's unless given)
    apps: tuple[str, ...] = field(default_factory=lambda: get_suite().apps)
    width: int = 64  # embedding width of words, spans, apps and the history
    hidden: int = 128  # width of the trunk
    channels: tuple[int, int] = (16, 32)  # convolution channels
    buckets: int = 4096  # hashed vocabulary size
    seed: int = 0  # initial weights and the sampling stream

    @classmethod
    def from_json(cls, text: str) -> TinyConfig:
        data = json.loads(text)
        data["apps"] = tuple(data["apps"])
        data["channels"] = tuple(data["channels"])
        return cls(**data)


@dataclass
class Encoded:
    """One observation (and, when learning, the recorded choice) as network inputs."""

    image: torch.Tensor  # [1, IMAGE_H, IMAGE_W]
    words: list[int]
    step_words: list[int]  # the goal's words paired with the step number
    history: torch.Tensor  # [HISTORY_DIM]
    spans: list[Span]
    span_features: list[list[int]]
    app_in_goal: torch.Tensor  # [apps]
    verb: int = -1  # the recorded choice; -1 when it cannot be scored
    argument: int = -1


def _bucket(token: str, buckets: int) -> int:
    """A stable hash (the same in every process, unlike `hash`)."""
    return zlib.crc32(token.encode("utf-8")) % buckets


def goal_words(goal: str) -> list[str]:
    return _WORD.findall(goal.lower())


def text_spans(goal: str) -> list[Span]:
    """The goal's quoted strings and its runs of up to MAX_SPAN_WORDS words, deduplicated."""
    spans: dict[str, Span] = {}

    def add(text: str, before: str, after: str, words: int, quoted: bool) -> None:
        if text and text not in spans:
            spans[text] = Span(text, (f"before={before.lower()}", f"after={after.lower()}",
                                      f"words={min(words, MAX_SPAN_WORDS + 1)}",
                                      f"quoted={quoted}"))

    for match in _QUOTED.finditer(goal):
        text = match.group(1) or match.group(2)
        before = goal[:match.start()].split()
        after = goal[match.end():].split()
        add(text, before[-1].strip(_EDGE_PUNCTUATION) if before else "<start>",
            after[0].strip(_EDGE_PUNCTUATION) if after else "<end>", len(text.split()), True)
    tokens = [t.strip(_EDGE_PUNCTUATION) for t in goal.replace("“", '"').split()]
    tokens = [t for t in tokens if t]
    for start in range(len(tokens)):
        for n in range(1, MAX_SPAN_WORDS + 1):
            if start + n > len(tokens):
                break
            add(" ".join(tokens[start:start + n]), tokens[start - 1] if start else "<start>",
                tokens[start + n] if start + n < len(tokens) else "<end>", n, False)
    return list(spans.values())


def history_vector(history: Sequence[str]) -> torch.Tensor:
    """The step (one-hot bucket), how often each verb was taken so far (thirds, up to 1) and
    the previous verb (one-hot), from the episode's earlier responses."""
    vector = torch.zeros(HISTORY_DIM)
    vector[min(len(history), STEP_BUCKETS - 1)] = 1.0
    counts = STEP_BUCKETS
    last = counts + len(VERBS) + 1
    verbs = [verb_of(read_response(response)) for response in history]
    for verb in verbs:
        vector[counts + verb + 1] = min(float(vector[counts + verb + 1]) + 1.0 / 3.0, 1.0)
    vector[last + (verbs[-1] + 1 if verbs else 0)] = 1.0
    return vector


def cell_of(coordinate: Sequence[float]) -> int:
    """The grid cell of a 0-999 coordinate."""
    col = min(GRID_W - 1, max(0, int(coordinate[0] * GRID_W / GRID)))
    row = min(GRID_H - 1, max(0, int(coordinate[1] * GRID_H / GRID)))
    return row * GRID_W + col


def cell_centre(cell: int) -> list[int]:
    row, col = divmod(cell, GRID_W)
    return [round((col + 0.5) * GRID / GRID_W), round((row + 0.5) * GRID / GRID_H)]


class TinyNet(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        c1, c2 = config.channels
        d, h = config.width, config.hidden
        self.conv = nn.Sequential(
            nn.Conv2d(1, c1, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(c1, c2, 3, stride=2, padding=1), nn.ReLU(),
        )  # -> [c2, GRID_H, GRID_W]
        self.words = nn.EmbeddingBag(config.buckets, d, mode="mean")
        self.history = nn.Linear(HISTORY_DIM, d)
        self.context = nn.Sequential(nn.Linear(2 * d, d), nn.ReLU())
        self.film = nn.Linear(d, 2 * c2)
        self.layout = nn.Sequential(nn.AdaptiveAvgPool2d((5, 3)), nn.Flatten(),
                                    nn.Linear(c2 * 15, d), nn.ReLU())
        self.trunk = nn.Sequential(nn.Linear(2 * d, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU())
        self.verb = nn.Linear(h, len(VERBS))
        # A direct path from the history to the verb (zero at start): "the last action was
        # open" must be able to veto another open on its own. Through the trunk alone, the
        # reward for opening Settings at step 0 spilled over to step 1, where the tiny policy
        # kept re-opening the app it was already in instead of tapping.
        self.verb_history = nn.Linear(HISTORY_DIM, len(VERBS))
        # A lookup from (goal word, step) to the verb, row and column logits (zero at start).
        # The network cannot read the screen's text, so where to tap for "Wi-Fi" at step 1
        # is memorised; through shared features alone, the first task family learned (say,
        # Do Not Disturb's row) was tapped for every goal. Words, not whole goals, key it, so
        # "airplane mode off" reuses what "airplane mode on" learned.
        self.step_words = nn.EmbeddingBag(config.buckets, len(VERBS) + len(POINT_VERBS) * (
            GRID_H + GRID_W), mode="sum")
        with torch.no_grad():
            self.verb.bias.copy_(torch.tensor([VERB_PRIOR.get(verb, 0.0) for verb in VERBS]))
            self.verb_history.weight.zero_()
            self.verb_history.bias.zero_()
            self.step_words.weight.zero_()
        self.heat = nn.Conv2d(c2, len(POINT_VERBS), 1)
        # The goal's and history's say on where to tap, as a row term plus a column term: a
        # reward for tapping one cell of a full-width row raises the whole row, so a list
        # entry is learned from a few taps instead of one tap per cell.
        self.row_prior = nn.Linear(h, len(POINT_VERBS) * GRID_H)
        self.col_prior = nn.Linear(h, len(POINT_VERBS) * GRID_W)
        self.span_query = nn.Linear(h, d)
        self.span_features = nn.EmbeddingBag(config.buckets, d, mode="sum")
        self.app_query = nn.Linear(h, d)
        self.apps = nn.Embedding(len(config.apps), d)
        self.app_named = nn.Parameter(torch.tensor(APP_NAMED_PRIOR))

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        goal = self.words(batch["words"], batch["word_offsets"])
        history = batch["history"]
        context = self.context(torch.cat([goal, self.history(history)], dim=1))
        features = self.conv(batch["images"])
        gamma, beta = self.film(context).chunk(2, dim=1)
        features = F.relu(features * (1 + gamma[:, :, None, None]) + beta[:, :, None, None])
        state = self.trunk(torch.cat([context, self.layout(features)], dim=1))
        lookup = self.step_words(batch["step_words"], batch["step_word_offsets"])
        verb_lookup, row_lookup, col_lookup = lookup.split(
            [len(VERBS), len(POINT_VERBS) * GRID_H, len(POINT_VERBS) * GRID_W], dim=1)
        rows = (self.row_prior(state) + row_lookup).view(-1, len(POINT_VERBS), GRID_H, 1)
        cols = (self.col_prior(state) + col_lookup).view(-1, len(POINT_VERBS), 1, GRID_W)
        cells = (self.heat(features) + rows + cols).flatten(2)
        spans = self.span_features(batch["span_ids"], batch["span_offsets"])
        span_scores = torch.full(batch["span_mask"].shape, float("-inf"))
        span_scores[batch["span_mask"]] = (
            spans * self.span_query(state)[batch["span_owner"]]).sum(dim=1)
        named = batch["app_in_goal"]
        apps = torch.where(named.sum(dim=1, keepdim=True) > 0, self.app_named * named,
                           self.app_query(state) @ self.apps.weight.T)
        verbs = self.verb(state) + self.verb_history(history) + verb_lookup
        return {"verb": verbs, "cells": cells, "spans": span_scores, "apps": apps}


class TinyPolicy(SmallPolicy[TinyConfig, Encoded]):
    """The trainable tiny policy (see the module docstring; acting, scoring, copies and files
    are `SmallPolicy`'s)."""

    name = "tiny-policy"
    config_file = CONFIG_FILE
    point_output = "cells"
    config_type = TinyConfig
    net_type = TinyNet

    def __init__(self, config: TinyConfig | None = None, *, seed: int | None = None,
                 module: nn.Module | None = None):
        super().__init__(config, seed=seed, module=module)
        self._app_names = [goal_words(app) for app in self.config.apps]

    def _read(self, observation: Observation) -> tuple[Encoded, str, None]:
        return self.encode(observation.goal, observation.screenshot, observation.responses), "", None

    def _encode_sample(self, sample: Sample) -> Encoded:
        return self.encode(sample.goal, sample.screenshot, sample.history)

    def _collate(self, items: Sequence[Encoded]) -> dict[str, torch.Tensor]:
        return collate(items)

    def _point(self, argument: int, encoded: Encoded) -> list[int]:
        return cell_centre(argument)

    def _point_argument(self, coordinate: Sequence[float], encoded: Encoded) -> int:
        return cell_of(coordinate)

    # --- inputs ------------------------------------------------------------------------------

    def encode(self, goal: str, screenshot_png: bytes, history: Sequence[str]) -> Encoded:
        image = Image.open(io.BytesIO(screenshot_png)).convert("L").resize(
            (IMAGE_W, IMAGE_H), Image.Resampling.BOX)
        pixels = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
        words = goal_words(goal)
        buckets = self.config.buckets
        tokens = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
        spans = text_spans(goal)
        if not spans:
            raise InvalidInput(f"goal: {goal!r} has no words to act on")
        present = set(words)
        step = min(len(history), STEP_BUCKETS - 1)
        return Encoded(
            image=pixels.view(1, IMAGE_H, IMAGE_W).float() / 255.0,
            words=[_bucket(t, buckets) for t in tokens] or [_bucket("<empty>", buckets)],
            step_words=[_bucket(f"{w}@{step}", buckets) for w in words]
            or [_bucket(f"<empty>@{step}", buckets)],
            history=history_vector(history),
            spans=spans,
            span_features=[[_bucket(f, buckets) for f in span.features] for span in spans],
            app_in_goal=torch.tensor([float(bool(name) and set(name) <= present)
                                      for name in self._app_names]),
        )


def collate(items: Sequence[Encoded]) -> dict[str, torch.Tensor]:
    """Stack encoded observations; spans are padded to the longest list (mask marks real)."""
    words = [torch.tensor(item.words) for item in items]
    step_words = [torch.tensor(item.step_words) for item in items]
    span_ids = [torch.tensor(ids) for item in items for ids in item.span_features]
    longest = max((len(item.spans) for item in items), default=0)
    span_mask = torch.zeros(len(items), max(longest, 1), dtype=torch.bool)
    owners = []
    for row, item in enumerate(items):
        span_mask[row, :len(item.spans)] = True
        owners += [row] * len(item.spans)
    return {
        "images": torch.stack([item.image for item in items]),
        "words": torch.cat(words),
        "word_offsets": offsets(words),
        "step_words": torch.cat(step_words),
        "step_word_offsets": offsets(step_words),
        "history": torch.stack([item.history for item in items]),
        "span_ids": torch.cat(span_ids) if span_ids else torch.zeros(0, dtype=torch.long),
        "span_offsets": offsets(span_ids),
        "span_mask": span_mask,
        "span_owner": torch.tensor(owners, dtype=torch.long),
        "app_in_goal": torch.stack([item.app_in_goal for item in items]),
        "verb": torch.tensor([item.verb for item in items]),
        "argument": torch.tensor([item.argument for item in items]),
    }

