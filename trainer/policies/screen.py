"""ScreenPolicy: a small CPU network that reads the screen's text and element positions.

The tiny policy (:mod:`.tiny`) sees pixels and taps a grid cell; where to tap for a goal
word is memorised per word, so a word never trained on (an unseen contact, a switch never
toggled in training) is a guess. This policy reads the screen as a list of *elements*, each
with its text, its box and its flags, and taps an element: its pointer scores every element
by how its text matches the goal, so a row showing "Anna Li" is found for the goal word "Li"
whether or not "Li" was ever trained on.

Three modules: this one (the features' initial weights, the encoding, the network and the
policy), :mod:`.screen_read` (what a screen shows: its elements and its other text) and
:mod:`.screen_progress` (what the episode did, read back from its own responses: taps, typed
values, goal words done).

Where the elements come from (:mod:`.screen_read`):

- the UI tree (``Observation.ui_tree``, a uiautomator dump; the simulated phone gives one):
  every node a user can act on (clickable, long-clickable, checkable, an edit field) is an
  element, its text its own text and description plus its non-actionable descendants' texts
  (a settings row reads "Connected devices Bluetooth, NFC"); a node without text (a switch)
  reads its parent's; the status bar, the navigation bar (the verbs back and home) and the
  on-screen keyboard's keys (`type` writes whole values) are left out;
- where there is no tree, the step's OCR lines (``steps.ocr_boxes`` from `elake enrich`), one
  element per line;
- with neither, a 4 x 8 grid of untexted cells, so the policy can still tap.

What it read is kept with the step (``steps.info["screen"]``: text, box, flags per element),
so learning scores exactly the elements that acting chose among; a step recorded by another
agent is read from its OCR lines.

Per element the network gets (the history parts from :mod:`.screen_progress`): its words (a hashed embedding shared with the goal's words, so
goal and element meet in one space), its box and flags, and *match features* computed from
the strings: the share of its words found in the goal and of the goal's words it covers, the
best character-trigram similarity (Dice) of a word of it to a goal word ("Favorite" to
"favourite"), where in the goal the match is (the goal's order: first, then second...),
whether an earlier tap of the episode landed on it on the same screen (during this visit to it,
and how often in the episode; the screen is named in the response, `ScreenText.signature`, so
a tap on one contact card's star does not mark the star of the next card, at the same point,
and the contact form opened again has fresh fields), and whether it names a goal word the
episode has not reached yet (`done_words`: the response also names the text it tapped, so a
row whose contact or page is done loses its pull), or is a form's first field still to fill
(`open_field`). The verb head also reads the episode's
progress (`PROGRESS_FEATURES`): once every goal word was changed in place (a switch, a star,
a typed value), or every goal value was typed and the form left, ending the episode starts
likelier, since a goal reached and not ended is undone by the steps left; with some values
typed and others not, a screen without a field leans to `back`, toward the next form. A
learned lookup of (goal word, element word) pairs adds what the strings do not say
("Bluetooth" lives under "Connected devices"). At start the pointer leans toward matching
elements (a fixed initial weight on the match features), so a fresh policy taps the named row
often enough for sparse rewards to be found.

Outputs are the tiny policy's verbs; the arguments are an element (click, long press: its
centre is tapped), a goal span (type: scored by its context in the goal, as the tiny policy
does, by whether the screen already shows it, whether it reads as a value and whether it is the
goal's first value the episode has not typed on this screen, `next_value`, `typed_of`) and an
app (open). `type` starts likelier while a focused edit field awaits a value (`awaiting_value`);
a field showing a value the episode typed (`filled`) is done: no boost to type more, and no
match pull to tap it again. Learning scores the same two tokens per step as the tiny policy
(:func:`.small.structured_logprobs`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from episodelake.collectors.envs.suites import get_suite
from episodelake.collectors.loop import Observation
from episodelake.lake.storage.errors import InvalidInput
from episodelake.trainer.policies.base import Sample
from episodelake.trainer.policies.screen_progress import (
    _WORD,
    STOP_WORDS,
    action_note,
    awaiting_value,
    done_words,
    filled,
    form_values,
    match_features,
    named_words,
    next_value,
    open_field,
    screen_note,
    taps_of,
    typed_of,
    value_spans,
    values_progress,
    visit_start,
)
from episodelake.trainer.policies.screen_read import (
    FLAGS,
    Element,
    ScreenText,
    element_at,
    read_screen,
)
from episodelake.trainer.policies.small import POINT_VERBS, VERBS, SmallPolicy, Span, offsets
from episodelake.trainer.policies.tiny import (
    APP_NAMED_PRIOR,
    HISTORY_DIM,
    VERB_PRIOR,
    _bucket,
    goal_words,
    history_vector,
    text_spans,
)

#: Initial pointer weights of the numeric features (0 for the others): toward what the goal
#: names (exact and fuzzy matches), away from what the episode already tapped (a switch or a
#: star tapped twice is undone; a list row tapped before is a sub-goal done).
POINT_PRIOR = {"overlap": 2.0, "fuzzy": 2.0, "tapped": -2.0, "pending": 2.0}
#: (`tapped`: tapped during this visit to the screen, `visit_start`; `taps`: how often on this
#: screen in the episode, up to 3; `pending`: names a goal word the episode has not reached,
#: `done_words`, so the list row of a contact already starred or of a page already done loses
#: its pull while the rows of what is left keep theirs; or is a form's first field still to
#: fill, `open_field`.)
#: Initial verb logits on top of the tiny policy's (tap about 6 times in 10): going back is how
#: a long task moves between the screens it recurs through; ending the episode, leaving the app,
#: waiting and enter with no field rarely help, and a fresh policy tried them every few steps.
SCREEN_VERB_PRIOR = {**VERB_PRIOR, "back": 1.0, "terminate": -1.0, "home": -1.0, "wait": -1.0,
                     "enter": -1.0}
#: Numeric features of an element (box, flags, text, match, history), in order.
ELEMENT_FEATURES = ("x0", "y0", "x1", "y1", "cx", "cy", "w", "h", *FLAGS, "has_text", "overlap",
                    "coverage", "fuzzy", "matched", "position", "tapped", "taps", "pending")
#: Numeric features of the episode's progress through the goal, read by the verb head: the share
#: of the goal's words changed in place (`done_words`), all of them changed, and whether an
#: element on screen names a goal word not reached yet (its `pending` feature); and, on a screen
#: with no edit field (a form saved and left), whether the episode typed some of the goal's
#: values but not all (`values_left`: another form awaits them) or all of them (`values_typed`).
PROGRESS_FEATURES = ("done_share", "all_done", "pending_visible", "values_left", "values_typed")
#: Initial verb logit of `terminate` once every goal word is done (0 before): a goal reached and
#: not ended is undone by the steps left. A fresh policy ended 0.01 of its steps (the verb prior
#: -1), so half the goals its runs reached were undone by the end of the step budget (a switch
#: tapped again, a star taken off).
TERMINATE_WHEN_DONE = 3.0
#: Initial verb logit of `back` on a screen without an edit field while some of the goal's
#: values are typed and some are not (`values_left`; 0 otherwise): the form that takes the rest
#: is reached back through the list. After saving the first contact, the new contact's card
#: drew the first long runs to its Favorite star (37 of 83 steps, back 2): 17 of 96 episodes
#: reached the form again, and the template's reward needs both contacts.
BACK_FOR_NEXT_FORM = 3.0

#: Numeric features of a goal span: already shown on screen, already typed on this screen
#: (`typed_of`), whether it reads as a value to type (`value_spans`), and whether it is the
#: first value not typed there yet (`next_value`).
SPAN_FEATURES = ("on_screen", "typed", "value", "next")
#: Initial weights of the span features (0 for the others): a form is filled with the goal's
#: values (a quoted text, a name, a number), each once, in the goal's order. Among the 50-odd
#: word runs of a long goal a fresh policy otherwise typed the right one about once in 50.
SPAN_PRIOR = {"value": 3.0, "typed": -3.0, "next": 3.0}
#: Initial verb logit of `type` while a focused text field awaits a value (`awaiting_value`;
#: 0 otherwise): typing is what an empty focused field is for, and a fresh policy typed there
#: 3 times in 100 (the verb prior keeps it rare elsewhere, where it does nothing). A field that
#: holds its typed value gets no boost: typing more there spoils the value.
TYPE_WHEN_FOCUSED = 3.0
#: Initial spread of the span context embeddings (`ScreenNet.span_features`): small, so at start
#: the span priors decide what is typed and learning adds the context. At the embedding's
#: default (1.0) its random scores spread about 4 logits and drowned them: a fresh policy typed
#: "555-0142" into the empty name field 6 times in 10, the name 1 in 7.
SPAN_INIT_STD = 0.1

CONFIG_FILE = "screen_policy.json"

_FEATURE = {name: i for i, name in enumerate(ELEMENT_FEATURES)}


@dataclass(frozen=True)
class ScreenConfig:
    """The network's shape; saved next to the weights."""

    #: the apps `open` can name: the task suite's (the default suite's unless given)
    apps: tuple[str, ...] = field(default_factory=lambda: get_suite().apps)
    width: int = 48  # embedding width of words, elements, spans and the history
    hidden: int = 96  # width of the trunk
    buckets: int = 4096  # hashed vocabulary size
    seed: int = 0  # initial weights and the sampling stream

    @classmethod
    def from_json(cls, text: str) -> ScreenConfig:
        data = json.loads(text)
        data["apps"] = tuple(data["apps"])
        return cls(**data)


# --- encoding --------------------------------------------------------------------------------

@dataclass
class Encoded:
    """One observation (and, when learning, the recorded choice) as network inputs."""

    words: list[int]
    screen_words: list[int]  # the screen's text outside the elements
    history: torch.Tensor  # [HISTORY_DIM]
    elements: list[Element]
    element_words: list[list[int]]
    element_pairs: list[list[int]]  # (goal word, element word) pairs, hashed
    element_features: torch.Tensor  # [elements, len(ELEMENT_FEATURES)]
    spans: list[Span]
    span_features: list[list[int]]
    span_numeric: torch.Tensor  # [spans, len(SPAN_FEATURES)]
    field_awaiting: float  # 1.0 when a focused edit field does not hold a typed value (`awaiting_value`)
    progress: torch.Tensor  # [len(PROGRESS_FEATURES)]
    app_in_goal: torch.Tensor  # [apps]
    verb: int = -1
    argument: int = -1


def encode(config: ScreenConfig, goal: str, screen: ScreenText, history: Sequence[str]) -> Encoded:
    """The network's inputs for a goal, what the screen shows and the earlier responses."""
    buckets = config.buckets
    elements = screen.elements
    words = goal_words(goal)
    tokens = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
    spans = text_spans(goal)
    if not spans:
        raise InvalidInput(f"goal: {goal!r} has no words to act on")
    taps = taps_of(history)
    here = screen.signature
    visit = taps_of(history[visit_start(history, here):])
    content_goal = [w for w in dict.fromkeys(words) if w not in STOP_WORDS]
    reached, changed = done_words(words, history, here)
    pending_words = set(content_goal) - reached
    typed = typed_of(history, here)
    values = value_spans(goal, spans)
    upcoming = next_value(values, typed)
    to_fill = open_field(elements, typed) if upcoming is not None else -1
    element_words, element_pairs, rows = [], [], []
    for index, element in enumerate(elements):
        text_words = _WORD.findall(element.text.lower())
        element_words.append([_bucket(f"w:{w}", buckets) for w in text_words] or [_bucket("<no text>", buckets)])
        element_pairs.append([_bucket(f"{g}|{w}", buckets) for g in content_goal for w in dict.fromkeys(text_words)]
                             or [_bucket("<no pair>", buckets)])
        x0, y0, x1, y1 = element.box
        hits = sum(element.contains(x, y) for x, y, on in taps if on is None or here is None or on == here)
        now = sum(element.contains(x, y) for x, y, on in visit if on is None or here is None or on == here)
        row = [x0, y0, x1, y1, (x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0,
               *(float(name in element.flags) for name in FLAGS), float(bool(text_words))]
        match = match_features(words, [] if filled(element, typed) else text_words)
        row += [match[k] for k in ("overlap", "coverage", "fuzzy", "matched", "position")]
        pending = index == to_fill or bool(named_words(words, text_words) & pending_words)
        row += [float(now > 0), min(hits / 3.0, 1.0), float(pending)]
        rows.append(row)
    screen_text = " ".join([screen.text, *(e.text for e in elements)]).lower()
    present = set(words)
    app_names = [goal_words(app) for app in config.apps]
    return Encoded(
        words=[_bucket(f"w:{t}", buckets) for t in tokens] or [_bucket("<empty>", buckets)],
        screen_words=[_bucket(f"w:{w}", buckets) for w in _WORD.findall(screen.text.lower())]
        or [_bucket("<no text>", buckets)],
        history=history_vector(history),
        elements=list(elements),
        element_words=element_words,
        element_pairs=element_pairs,
        element_features=torch.tensor(rows, dtype=torch.float32).view(len(elements), len(ELEMENT_FEATURES)),
        spans=spans,
        span_features=[[_bucket(f, buckets) for f in span.features] for span in spans],
        span_numeric=torch.tensor([[float(span.text.lower() in screen_text), float(span.text in typed),
                                    float(span.text in values), float(span.text == upcoming)] for span in spans]),
        field_awaiting=float(awaiting_value(elements, typed)),
        progress=torch.tensor([len(changed) / max(len(content_goal), 1),
                               float(bool(content_goal) and changed >= set(content_goal)),
                               float(any(r[_FEATURE["pending"]] for r in rows)),
                               *values_progress(values, form_values(history), elements)]),
        app_in_goal=torch.tensor([float(bool(name) and set(name) <= present) for name in app_names]),
    )


def collate(items: Sequence[Encoded]) -> dict[str, torch.Tensor]:
    """Stack encoded observations; elements and spans are padded (masks mark the real ones)."""
    words = [torch.tensor(item.words) for item in items]
    screen_words = [torch.tensor(item.screen_words) for item in items]
    element_words = [torch.tensor(ids) for item in items for ids in item.element_words]
    element_pairs = [torch.tensor(ids) for item in items for ids in item.element_pairs]
    span_ids = [torch.tensor(ids) for item in items for ids in item.span_features]
    return {
        "words": torch.cat(words),
        "word_offsets": offsets(words),
        "screen_words": torch.cat(screen_words),
        "screen_word_offsets": offsets(screen_words),
        "history": torch.stack([item.history for item in items]),
        "element_words": torch.cat(element_words),
        "element_word_offsets": offsets(element_words),
        "element_pairs": torch.cat(element_pairs),
        "element_pair_offsets": offsets(element_pairs),
        "element_features": torch.cat([item.element_features for item in items]),
        "element_mask": _mask([len(item.elements) for item in items]),
        "span_ids": torch.cat(span_ids),
        "span_offsets": offsets(span_ids),
        "span_numeric": torch.cat([item.span_numeric for item in items]),
        "span_mask": _mask([len(item.spans) for item in items]),
        "field_awaiting": torch.tensor([[item.field_awaiting] for item in items]),
        "progress": torch.stack([item.progress for item in items]),
        "app_in_goal": torch.stack([item.app_in_goal for item in items]),
        "verb": torch.tensor([item.verb for item in items]),
        "argument": torch.tensor([item.argument for item in items]),
    }


def _mask(lengths: Sequence[int]) -> torch.Tensor:
    mask = torch.zeros(len(lengths), max(max(lengths, default=1), 1), dtype=torch.bool)
    for row, n in enumerate(lengths):
        mask[row, :n] = True
    return mask


def _scatter(values: torch.Tensor, mask: torch.Tensor, fill: float) -> torch.Tensor:
    """Rows of `values` (one per real entry) placed into a [batch, longest, ...] tensor."""
    out = values.new_full((*mask.shape, *values.shape[1:]), fill)
    out[mask] = values
    return out


# --- the network -----------------------------------------------------------------------------

class ScreenNet(nn.Module):
    def __init__(self, config: ScreenConfig):
        super().__init__()
        d, h, n = config.width, config.hidden, len(ELEMENT_FEATURES)
        # one table for goal words and on-screen words: a goal word and the same word on screen
        # start as the same vector, so the pointer's dot product can match them
        self.words = nn.EmbeddingBag(config.buckets, d, mode="mean")
        self.history = nn.Linear(HISTORY_DIM, d)
        self.context = nn.Sequential(nn.Linear(2 * d, d), nn.ReLU())
        self.element = nn.Sequential(nn.Linear(d + n, d), nn.ReLU(), nn.Linear(d, d))
        self.trunk = nn.Sequential(nn.Linear(4 * d, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU())
        self.verb = nn.Linear(h, len(VERBS))
        self.verb_history = nn.Linear(HISTORY_DIM, len(VERBS))  # zero at start (see TinyNet)
        self.verb_focus = nn.Linear(1, len(VERBS), bias=False)  # a field awaiting a value: type (TYPE_WHEN_FOCUSED)
        self.verb_progress = nn.Linear(len(PROGRESS_FEATURES), len(VERBS), bias=False)  # TERMINATE_WHEN_DONE
        self.point_query = nn.Linear(h, len(POINT_VERBS) * d)
        # (goal word, element word) -> pointer logit per point verb, zero at start
        self.pairs = nn.EmbeddingBag(config.buckets, len(POINT_VERBS), mode="sum")
        # the pointer's say from the numeric features, starting at "tap what the goal names"
        self.point_prior = nn.Linear(n, len(POINT_VERBS))
        self.span_query = nn.Linear(h, d)
        self.span_features = nn.EmbeddingBag(config.buckets, d, mode="sum")
        self.span_prior = nn.Linear(len(SPAN_FEATURES), 1, bias=False)
        self.app_query = nn.Linear(h, d)
        self.apps = nn.Embedding(len(config.apps), d)
        self.app_named = nn.Parameter(torch.tensor(APP_NAMED_PRIOR))
        with torch.no_grad():
            self.verb.bias.copy_(torch.tensor([SCREEN_VERB_PRIOR.get(verb, 0.0) for verb in VERBS]))
            for layer in (self.verb_history, self.point_prior):
                layer.weight.zero_()
                layer.bias.zero_()
            self.pairs.weight.zero_()
            self.span_prior.weight.zero_()
            self.span_features.weight.normal_(0.0, SPAN_INIT_STD)
            for name, weight in SPAN_PRIOR.items():
                self.span_prior.weight[0, SPAN_FEATURES.index(name)] = weight
            self.verb_focus.weight.zero_()
            self.verb_focus.weight[VERBS.index("type"), 0] = TYPE_WHEN_FOCUSED
            self.verb_progress.weight.zero_()
            self.verb_progress.weight[VERBS.index("terminate"), PROGRESS_FEATURES.index("all_done")] = TERMINATE_WHEN_DONE
            self.verb_progress.weight[VERBS.index("terminate"), PROGRESS_FEATURES.index("values_typed")] = TERMINATE_WHEN_DONE
            self.verb_progress.weight[VERBS.index("back"), PROGRESS_FEATURES.index("values_left")] = BACK_FOR_NEXT_FORM
            for name, weight in POINT_PRIOR.items():
                self.point_prior.weight[:, _FEATURE[name]] = weight

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        goal = self.words(batch["words"], batch["word_offsets"])
        history = batch["history"]
        context = self.context(torch.cat([goal, self.history(history)], dim=1))
        mask = batch["element_mask"]
        features = batch["element_features"]
        words = self.words(batch["element_words"], batch["element_word_offsets"])
        elements = _scatter(self.element(torch.cat([words, features], dim=1)), mask, 0.0)  # [B, E, d]
        count = mask.sum(dim=1, keepdim=True).clamp(min=1)
        mean = elements.sum(dim=1) / count
        peak = elements.masked_fill(~mask[:, :, None], float("-inf")).amax(dim=1).nan_to_num(neginf=0.0)
        shown = self.words(batch["screen_words"], batch["screen_word_offsets"])
        state = self.trunk(torch.cat([context, shown, mean, peak], dim=1))
        queries = self.point_query(state).view(len(state), len(POINT_VERBS), -1)  # [B, P, d]
        attention = torch.einsum("bpd,bed->bpe", queries, elements) / elements.shape[-1] ** 0.5
        lookup = _scatter(self.pairs(batch["element_pairs"], batch["element_pair_offsets"])
                          + self.point_prior(features), mask, 0.0)  # [B, E, P]
        points = (attention + lookup.transpose(1, 2)).masked_fill(~mask[:, None, :], float("-inf"))
        span_mask = batch["span_mask"]
        owners = span_mask.nonzero()[:, 0]
        spans = self.span_features(batch["span_ids"], batch["span_offsets"])
        span_scores = (spans * self.span_query(state)[owners]).sum(dim=1) + self.span_prior(
            batch["span_numeric"])[:, 0]
        named = batch["app_in_goal"]
        apps = torch.where(named.sum(dim=1, keepdim=True) > 0, self.app_named * named,
                           self.app_query(state) @ self.apps.weight.T)
        verbs = (self.verb(state) + self.verb_history(history) + self.verb_focus(batch["field_awaiting"])
                 + self.verb_progress(batch["progress"]))
        return {"verb": verbs, "points": points, "spans": _scatter(span_scores, span_mask, float("-inf")),
                "apps": apps}


# --- the policy ------------------------------------------------------------------------------

class ScreenPolicy(SmallPolicy[ScreenConfig, Encoded]):
    """The trainable screen-reading policy (see the module docstring; acting, scoring, copies
    and files are `SmallPolicy`'s). What it read of the screen is kept in the step's info for
    learning, and the response names the screen it acted on (`ScreenText.signature`)."""

    name = "screen-policy"
    config_file = CONFIG_FILE
    point_output = "points"
    config_type = ScreenConfig
    net_type = ScreenNet

    def _read(self, observation: Observation) -> tuple[Encoded, str, dict[str, Any]]:
        screen = read_screen(observation.ui_tree)
        encoded = encode(self.config, observation.goal, screen, observation.responses)
        return encoded, screen_note(screen.signature), {"screen": screen.to_json()}

    def _encode_sample(self, sample: Sample) -> Encoded:
        return encode(self.config, sample.goal, self.screen_of(sample), sample.history)

    def _note(self, verb: str, argument: int, encoded: Encoded) -> str:
        return action_note(verb, encoded.elements, argument)

    def _collate(self, items: Sequence[Encoded]) -> dict[str, torch.Tensor]:
        return collate(items)

    def _point(self, argument: int, encoded: Encoded) -> list[int]:
        return encoded.elements[argument].centre

    def _point_argument(self, coordinate: Sequence[float], encoded: Encoded) -> int:
        """The element under the point (-1 when none is: the verb alone is scored)."""
        return element_at(encoded.elements, coordinate)

    # --- inputs ------------------------------------------------------------------------------

    def screen_of(self, sample: Sample) -> ScreenText:
        """What the policy read when it acted (kept in the step's info), else the step's OCR
        lines, else the fallback grid."""
        kept = (sample.info or {}).get("screen")
        if kept:
            return ScreenText.from_json(kept)
        return read_screen(None, sample.ocr_boxes)
