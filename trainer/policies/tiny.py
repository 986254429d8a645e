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
log p(argument | verb), each with its own PPO ratio (see `TinyPolicy.score`).
"""

from __future__ import annotations

import io
import json
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from episodelake.collectors.envs.base import Device
from episodelake.collectors.envs.suites import get_suite
from episodelake.collectors.loop import Observation, Reply
from episodelake.lake.vocab.action_space import GRID
from episodelake.lake.vocab.families import ParsedAction, format_tool_call, parse_response
from episodelake.trainer.policies.base import Sample, read_checkpoint, save_checkpoint
from episodelake.trainer.ppo import TokenLogProbs

IMAGE_W, IMAGE_H = 36, 120
#: 9 x 30 cells of 120 x 80 logical pixels: a cell centre lands on any control at least that
#: size (the settings switches are 150 x 84).
GRID_W, GRID_H = 9, 30
CELLS = GRID_W * GRID_H
VERBS = ("click", "long_press", "swipe_up", "swipe_down", "swipe_left", "swipe_right", "type",
         "open", "back", "home", "enter", "wait", "terminate")
POINT_VERBS = ("click", "long_press")
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

_VERB_INDEX = {verb: i for i, verb in enumerate(VERBS)}
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


@dataclass(frozen=True)
class Span:
    """A piece of the goal that could be typed, with the context it is scored by."""

    text: str
    features: tuple[str, ...]


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


def verb_of(parsed: ParsedAction) -> int:
    """The index in VERBS of a parsed action; -1 for actions outside the tiny vocabulary."""
    if not parsed.valid:
        return -1
    kind, action = parsed.action_type, parsed.action
    if kind == "swipe":
        kind = "swipe_" + action["direction"]
    elif kind == "system_button":
        kind = action["button"]
    elif kind == "terminate" and action["status"] != "success":
        return -1
    return _VERB_INDEX.get(kind, -1)


def history_vector(history: Sequence[str]) -> torch.Tensor:
    """The step (one-hot bucket), how often each verb was taken so far (thirds, up to 1) and
    the previous verb (one-hot), from the episode's earlier responses."""
    vector = torch.zeros(HISTORY_DIM)
    vector[min(len(history), STEP_BUCKETS - 1)] = 1.0
    counts = STEP_BUCKETS
    last = counts + len(VERBS) + 1
    verbs = [verb_of(parse_response(response)) for response in history]
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


def structured_logprobs(verb_logits: torch.Tensor, verbs: torch.Tensor, arguments: torch.Tensor,
                        argument_logits: Callable[[str], torch.Tensor | None]) -> TokenLogProbs:
    """log p(verb) and log p(argument | verb) of recorded choices as two tokens per step (the
    argument's masked out for verbs without one, both for choices that cannot be scored:
    verb -1), with their entropies; `argument_logits(verb)` gives a verb's argument logits."""
    verb_logp = F.log_softmax(verb_logits, dim=1)
    logp = verb_logp.gather(1, verbs.clamp(min=0)[:, None])[:, 0]
    entropy = -(verb_logp.exp() * verb_logp).sum(dim=1)
    arg_logp = torch.zeros_like(logp)
    arg_entropy = torch.zeros_like(logp)
    has_argument = torch.zeros_like(verbs, dtype=torch.bool)
    for index, verb in enumerate(VERBS):
        logits = argument_logits(verb)
        if logits is None:
            continue
        chosen = (verbs == index) & (arguments >= 0)
        if not bool(chosen.any()):
            continue
        log_probs = F.log_softmax(logits, dim=1)
        picked = log_probs.gather(1, arguments.clamp(0, logits.shape[1] - 1)[:, None])[:, 0]
        spread = -(log_probs.exp() * log_probs.nan_to_num(neginf=0.0)).sum(dim=1)
        arg_logp = torch.where(chosen, picked, arg_logp)
        arg_entropy = torch.where(chosen, spread, arg_entropy)
        has_argument |= chosen
    scored = verbs >= 0
    mask = torch.stack([scored, scored & has_argument], dim=1).float()
    logp = torch.stack([logp, arg_logp], dim=1).masked_fill(mask == 0, 0.0)
    return TokenLogProbs(logp, mask, torch.stack([entropy, arg_entropy], dim=1))


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


class TinyPolicy:
    """The trainable tiny policy (see the module docstring)."""

    name = "tiny-policy"
    history_length = 0

    def __init__(self, config: TinyConfig | None = None, *, seed: int | None = None,
                 module: TinyNet | None = None):
        """`seed` seeds the sampling stream (default: the config's seed); `module` shares
        existing weights instead of initialising new ones from the config's seed."""
        self.config = config or TinyConfig()
        if module is None:
            with torch.random.fork_rng():
                torch.manual_seed(self.config.seed)
                module = TinyNet(self.config)
        self.module = module
        self.generator = torch.Generator().manual_seed(
            self.config.seed if seed is None else seed)
        self._app_names = [goal_words(app) for app in self.config.apps]

    # --- acting ------------------------------------------------------------------------------

    def act(self, observation: Observation) -> Reply:
        """Sample an action for the screen; an episode with a seed samples from it, so the
        same task and seed give the same episode in any worker."""
        if observation.step == 0 and observation.seed is not None:
            self.generator.manual_seed(observation.seed)
        encoded = self.encode(observation.goal, observation.screenshot, observation.responses)
        with torch.no_grad():
            out = self.module(collate([encoded]))
        verb_p = F.softmax(out["verb"][0], dim=0)
        verb = int(torch.multinomial(verb_p, 1, generator=self.generator))
        name = VERBS[verb]
        prob = float(verb_p[verb])
        choices = self._argument_logits(out, name)
        argument = -1
        if choices is not None:
            arg_p = F.softmax(choices[0], dim=0)
            argument = int(torch.multinomial(arg_p, 1, generator=self.generator))
            prob *= float(arg_p[argument])
        action = self._action(name, argument, encoded.spans)
        return Reply(format_tool_call(action, f"tiny policy: {VERBS[verb]} (p={prob:.3f})"))

    def _argument_logits(self, out: dict[str, torch.Tensor], verb: str) -> torch.Tensor | None:
        if verb in POINT_VERBS:
            return out["cells"][:, POINT_VERBS.index(verb)]
        if verb == "type":
            return out["spans"]
        if verb == "open":
            return out["apps"]
        return None

    def _action(self, verb: str, argument: int, spans: Sequence[Span]) -> dict[str, Any]:
        if verb in POINT_VERBS:
            return {"action": verb, "coordinate": cell_centre(argument)}
        if verb.startswith("swipe_"):
            return {"action": "swipe", "direction": verb.removeprefix("swipe_")}
        if verb == "type":
            return {"action": "type", "text": spans[argument].text}
        if verb == "open":
            return {"action": "open", "text": self.config.apps[argument]}
        if verb in ("back", "home", "enter"):
            return {"action": "system_button", "button": verb}
        if verb == "terminate":
            return {"action": "terminate", "status": "success"}
        return {"action": verb}

    def choice(self, response: str, spans: Sequence[Span]) -> tuple[int, int]:
        """(verb, argument) of a recorded response; (-1, -1) when this policy could not
        have written it (another action, a text that is not a span of the goal)."""
        parsed = parse_response(response)
        verb = verb_of(parsed)
        if verb < 0 or VERBS[verb] not in (*POINT_VERBS, "type", "open"):
            return verb, -1
        if VERBS[verb] in POINT_VERBS:
            return verb, cell_of(parsed.action["coordinate"])
        if VERBS[verb] == "type":
            texts = [span.text for span in spans]
            text = parsed.action["text"]
            return (verb, texts.index(text)) if text in texts else (-1, -1)
        apps = [app.lower() for app in self.config.apps]
        wanted = parsed.action["text"].lower()
        return (verb, apps.index(wanted)) if wanted in apps else (-1, -1)

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
            raise ValueError(f"goal: {goal!r} has no words to act on")
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

    def prepare(self, samples: Sequence[Sample]) -> list[Encoded]:
        prepared = []
        for sample in samples:
            encoded = self.encode(sample.goal, sample.screenshot, sample.history)
            encoded.verb, encoded.argument = self.choice(sample.response, encoded.spans)
            prepared.append(encoded)
        return prepared

    # --- learning ----------------------------------------------------------------------------

    def score(self, prepared: Sequence[Encoded]) -> TokenLogProbs:
        """Two tokens per step, as a VLM's response has one per decision: the verb, then its
        argument (a cell, a span, an app; masked out for verbs without one). Each gets its
        own PPO ratio and clip, so a rare good argument (one row of the grid) can gain
        probability at the same pace as its verb instead of sharing one clipped ratio."""
        batch = collate(prepared)
        out = self.module(batch)
        return structured_logprobs(out["verb"], batch["verb"], batch["argument"],
                                   lambda verb: self._argument_logits(out, verb))

    def stats(self) -> dict[str, float]:
        return {}

    # --- copies and files --------------------------------------------------------------------

    def agent(self) -> _TinyAgent:
        state = {name: value.detach().clone() for name, value in self.module.state_dict().items()}
        return _TinyAgent(self.config, state)

    def reference(self) -> TinyPolicy:
        """The initial weights (the config's seed), frozen: the KL reference."""
        initial = TinyPolicy(self.config)
        initial.module.requires_grad_(False)
        return initial

    def save(self, folder: Path) -> None:
        save_checkpoint(folder, self.module, json.dumps(asdict(self.config)), CONFIG_FILE)

    @classmethod
    def load(cls, folder: Path | str, *, seed: int | None = None) -> TinyPolicy:
        """A policy saved by `save` (e.g. a training checkpoint), ready to act."""
        config, weights = read_checkpoint(folder, CONFIG_FILE, "TinyPolicy")
        policy = cls(TinyConfig.from_json(config), seed=seed)
        policy.module.load_state_dict(weights)
        return policy


class _TinyAgent:
    """A snapshot of the weights that opens as an acting copy in a rollout worker (an
    agent spec). Picklable: a worker process builds the network once and shares it among
    the copies it opens, each sampling from its episodes' seeds."""

    def __init__(self, config: TinyConfig, state: dict[str, torch.Tensor]):
        self.config = config
        self.state = state
        self._module: TinyNet | None = None

    def open(self, device: Device) -> TinyPolicy:
        if self._module is None:
            self._module = TinyNet(self.config)
            self._module.load_state_dict(self.state)
            self._module.requires_grad_(False)
        return TinyPolicy(self.config, module=self._module)

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "state": self.state, "_module": None}


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
        "word_offsets": _offsets(words),
        "step_words": torch.cat(step_words),
        "step_word_offsets": _offsets(step_words),
        "history": torch.stack([item.history for item in items]),
        "span_ids": torch.cat(span_ids) if span_ids else torch.zeros(0, dtype=torch.long),
        "span_offsets": _offsets(span_ids),
        "span_mask": span_mask,
        "span_owner": torch.tensor(owners, dtype=torch.long),
        "app_in_goal": torch.stack([item.app_in_goal for item in items]),
        "verb": torch.tensor([item.verb for item in items]),
        "argument": torch.tensor([item.argument for item in items]),
    }


def _offsets(parts: Sequence[torch.Tensor]) -> torch.Tensor:
    lengths = torch.tensor([len(p) for p in parts], dtype=torch.long)
    return torch.cumsum(lengths, 0) - lengths
