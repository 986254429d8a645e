"""ScreenPolicy: a small CPU network that reads the screen's text and element positions.

The tiny policy (:mod:`.tiny`) sees pixels and taps a grid cell; where to tap for a goal
word is memorised per word, so a word never trained on (an unseen contact, a switch never
toggled in training) is a guess. This policy reads the screen as a list of *elements*, each
with its text, its box and its flags, and taps an element: its pointer scores every element
by how its text matches the goal, so a row showing "Anna Li" is found for the goal word "Li"
whether or not "Li" was ever trained on.

Where the elements come from:

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

Per element the network gets: its words (a hashed embedding shared with the goal's words, so
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

import hashlib
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from episodelake.collectors.envs.suites import get_suite
from episodelake.collectors.loop import Observation
from episodelake.lake.vocab.action_space import GRID
from episodelake.trainer.policies.base import Sample
from episodelake.trainer.policies.small import (
    POINT_VERBS,
    VERBS,
    SmallPolicy,
    Span,
    offsets,
    read_response,
)
from episodelake.trainer.policies.tiny import (
    _EDGE_PUNCTUATION,
    APP_NAMED_PRIOR,
    HISTORY_DIM,
    MAX_SPAN_WORDS,
    VERB_PRIOR,
    _bucket,
    goal_words,
    history_vector,
    text_spans,
)

#: Flags of an element, in the order of its flag bits.
FLAGS = ("clickable", "long_clickable", "checkable", "checked", "editable", "scrollable", "focused")
#: Elements read per screen at most (a dense list is cut, top to bottom).
MAX_ELEMENTS = 64
#: The fallback grid when a screen has neither a tree nor OCR lines.
FALLBACK_COLS, FALLBACK_ROWS = 4, 8
#: The status bar's resource id (after the package), left out of what is read.
STATUS_BAR = ":id/status_bar"
#: The navigation bar's resource id, left out too: its Back and Home are the verbs back and
#: home, whose priors a tap on them bypassed (a fresh policy tapped Home or Back in 17 of 100
#: steps on the empty contact form, with the verb home at 1 in 100).
NAVIGATION_BAR = ":id/navigation_bar"
#: What the on-screen keyboard's package names contain (Gboard's and AOSP's
#: ``...inputmethod.latin``); its keys are left out of what is read. `type` writes a whole value,
#: while 35 keys took 9 in 10 of a tap's probability whenever a field had the focus, and each tap
#: wrote a stray letter into the field (31% of the taps on the contact form in the first long runs).
KEYBOARD_PACKAGE = "inputmethod"
#: Goal words that say what to do, not what to look for; they match nothing on screen.
STOP_WORDS = frozenset({"a", "an", "the", "to", "and", "then", "with", "of", "in", "on", "off", "for",
                        "turn", "add", "set", "put", "one", "two", "it", "is", "my"})
#: Words shorter than this are matched exactly only, never by trigrams.
FUZZY_MIN = 4
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

#: Hex digits of a screen's signature, and how a response names the screen it acted on.
SIGNATURE_HEX = 10
SCREEN_MARK = "on screen "
#: How a response names the text of the element it tapped.
TAPPED_MARK = "tapped "
#: How a response marks a text typed into a form (a screen of `FORM_FIELDS` edit fields or
#: more), not a lone search box (`form_values`).
FORM_MARK = "into a form"
#: Edit fields that make a screen a form (`open_field`, `FORM_MARK`); one field is a search box.
FORM_FIELDS = 2
#: The longest tapped text a response names (a row's text with its subtitle fits).
MAX_NOTE = 80

_WORD = re.compile(r"[a-z0-9]+")
_ON_SCREEN = re.compile(SCREEN_MARK + rf"([0-9a-f]{{{SIGNATURE_HEX}}})\b")
_TAPPED = re.compile(TAPPED_MARK + r'"([^"]*)"')
_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
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


# --- reading the screen ----------------------------------------------------------------------

@dataclass(frozen=True)
class Element:
    """One thing on screen to act on: its text, its box in fractions of the screen (x0, y0
    the top left corner) and its flags (names in `FLAGS`)."""

    text: str
    box: tuple[float, float, float, float]
    flags: frozenset[str] = frozenset()

    @property
    def centre(self) -> list[int]:
        """Where a tap on it lands, in the 0-999 coordinates of the action space."""
        x0, y0, x1, y1 = self.box
        return [min(GRID, max(0, round((x0 + x1) / 2 * GRID))), min(GRID, max(0, round((y0 + y1) / 2 * GRID)))]

    def contains(self, fx: float, fy: float) -> bool:
        x0, y0, x1, y1 = self.box
        return x0 <= fx <= x1 and y0 <= fy <= y1

    def to_json(self) -> list[Any]:
        bits = sum(1 << i for i, name in enumerate(FLAGS) if name in self.flags)
        return [self.text, *(round(v, 4) for v in self.box), bits]

    @classmethod
    def from_json(cls, item: Sequence[Any]) -> Element:
        text, x0, y0, x1, y1, bits = item
        return cls(text, (x0, y0, x1, y1), frozenset(name for i, name in enumerate(FLAGS) if bits >> i & 1))


def elements_from_tree(tree: str) -> list[Element]:
    """The actionable nodes of a uiautomator dump, top to bottom (module docstring)."""
    return read_tree(tree)[0]


def read_tree(tree: str) -> tuple[list[Element], str]:
    """(the actionable elements, the text of everything else: titles, labels, a toast)."""
    root = ET.fromstring(tree)
    nodes = list(root.iter("node"))
    if not nodes:
        return [], ""
    size = _bounds(nodes[0].get("bounds", ""))
    width, height = (size[2], size[3]) if size and size[2] > 0 and size[3] > 0 else (1080, 2400)
    found: list[Element] = []

    def walk(node: ET.Element, parent_text: str) -> str:
        """Adds the actionable nodes under `node`; returns the text its parent may read."""
        if _left_out(node):
            return ""
        own = " ".join(dict.fromkeys(t for t in (node.get("text", ""), node.get("content-desc", "")) if t.strip()))
        actionable = _flags(node)
        children = [walk(child, own or parent_text) for child in node.findall("node")]
        text = " ".join(dict.fromkeys(t for t in (own, *children) if t))
        box = _bounds(node.get("bounds", ""))
        if actionable and box is not None and box[2] > box[0] and box[3] > box[1]:
            found.append(Element(text or parent_text, (box[0] / width, box[1] / height, box[2] / width,
                                                       box[3] / height), actionable))
            return ""  # an actionable child's text is its own, not its parent's
        return text

    rest = walk(nodes[0], "")
    found.sort(key=lambda e: (e.box[1], e.box[0]))
    return found[:MAX_ELEMENTS], rest


def _left_out(node: ET.Element) -> bool:
    """The status bar (its clock and battery change between episodes and say nothing), the
    navigation bar and the keyboard (`NAVIGATION_BAR`, `KEYBOARD_PACKAGE`)."""
    rid = node.get("resource-id", "")
    return rid.endswith((STATUS_BAR, NAVIGATION_BAR)) or KEYBOARD_PACKAGE in node.get("package", "")


def _flags(node: ET.Element) -> frozenset[str]:
    flags = {name for name, attr in (("clickable", "clickable"), ("long_clickable", "long-clickable"),
                                     ("checkable", "checkable"), ("scrollable", "scrollable"))
             if node.get(attr) == "true"}
    if "EditText" in node.get("class", ""):
        flags.add("editable")
    if not flags - {"scrollable"}:
        return frozenset()  # a list itself is swiped, not tapped
    if node.get("checked") == "true":
        flags.add("checked")
    if node.get("focused") == "true":
        flags.add("focused")
    return frozenset(flags)


def _bounds(text: str) -> tuple[int, int, int, int] | None:
    match = _BOUNDS.match(text)
    if match is None:
        return None
    x0, y0, x1, y1 = (int(v) for v in match.groups())
    return x0, y0, x1, y1


def elements_from_ocr(lines: Sequence[dict[str, Any]]) -> list[Element]:
    """One element per OCR line (``steps.ocr_boxes``: text and box in fractions), top to bottom."""
    found = [Element(line["text"], (line["x0"], line["y0"], line["x1"], line["y1"]), frozenset({"clickable"}))
             for line in lines if line.get("text") and None not in (line.get(k) for k in ("x0", "y0", "x1", "y1"))]
    found.sort(key=lambda e: (e.box[1], e.box[0]))
    return found[:MAX_ELEMENTS]


def fallback_grid() -> list[Element]:
    """Untexted cells covering the screen, for a screen with neither tree nor OCR lines."""
    w, h = 1 / FALLBACK_COLS, 1 / FALLBACK_ROWS
    return [Element("", (c * w, r * h, (c + 1) * w, (r + 1) * h), frozenset({"clickable"}))
            for r in range(FALLBACK_ROWS) for c in range(FALLBACK_COLS)]


@dataclass(frozen=True)
class ScreenText:
    """What the policy reads of one screen: the elements to act on and the other text."""

    elements: list[Element]
    text: str = ""

    @property
    def signature(self) -> str | None:
        """Which screen this is, for "already tapped here": a hash of its text outside the
        elements (a page's title, a contact card's name), so the same page matches itself
        after a switch on it flipped, while a tap on one card's star or on a settings page
        does not mark the element at the same point of another card or of the list. None
        when there is no such text (OCR lines, the fallback grid): taps then count by their
        point alone."""
        text = " ".join(self.text.lower().split())
        return hashlib.sha1(text.encode()).hexdigest()[:SIGNATURE_HEX] if text else None

    def to_json(self) -> dict[str, Any]:
        return {"elements": [element.to_json() for element in self.elements], "text": self.text}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScreenText:
        return cls([Element.from_json(item) for item in data["elements"]], data.get("text") or "")


def read_screen(ui_tree: str | None = None, ocr_lines: Sequence[dict[str, Any]] = ()) -> ScreenText:
    """The screen's elements: from the tree, else the OCR lines, else the fallback grid."""
    elements, text = read_tree(ui_tree) if ui_tree else ([], "")
    if not elements and ocr_lines:
        elements = elements_from_ocr(ocr_lines)
    return ScreenText(elements or fallback_grid(), text)


def element_at(elements: Sequence[Element], coordinate: Sequence[float]) -> int:
    """The index of the smallest element containing a 0-999 point; -1 when none does."""
    fx, fy = coordinate[0] / GRID, coordinate[1] / GRID
    inside = [(e.box[2] - e.box[0]) * (e.box[3] - e.box[1]) for e in elements]
    hits = [i for i, e in enumerate(elements) if e.contains(fx, fy)]
    return min(hits, key=lambda i: inside[i]) if hits else -1


def _trigrams(word: str) -> set[str]:
    padded = f"#{word}#"
    return {padded[i:i + 3] for i in range(len(padded) - 2)}


def match_features(goal: Sequence[str], words: Sequence[str]) -> dict[str, float]:
    """How an element's words match the goal's (lower-case words, stop words kept in `goal`
    for positions): exact overlap both ways, the best trigram similarity, whether anything
    matched and where in the goal the first match is (0 first word .. 1 last; 1 when none)."""
    content = [w for w in dict.fromkeys(words) if w not in STOP_WORDS]
    wanted = {w for w in goal if w not in STOP_WORDS}
    if not content or not wanted:
        return {"overlap": 0.0, "coverage": 0.0, "fuzzy": 0.0, "matched": 0.0, "position": 1.0}
    hits = [w for w in content if w in wanted]
    fuzzy = 0.0
    for word in content:
        if len(word) < FUZZY_MIN:
            continue
        grams = _trigrams(word)
        for other in wanted:
            if len(other) >= FUZZY_MIN:
                g = _trigrams(other)
                fuzzy = max(fuzzy, 2 * len(grams & g) / (len(grams) + len(g)))
    positions = [i for i, w in enumerate(goal) if w in hits] if hits else []
    matched = bool(hits) or fuzzy >= 0.5
    return {"overlap": len(hits) / len(content), "coverage": len(set(hits)) / len(wanted), "fuzzy": fuzzy,
            "matched": float(matched),
            "position": positions[0] / max(len(goal) - 1, 1) if positions else 1.0}


def taps_of(history: Sequence[str]) -> list[tuple[float, float, str | None]]:
    """The points (fractions of the screen) the episode's earlier responses tapped, each with
    the signature of the screen it was tapped on (`ScreenText.signature`, written in the
    response's thinking; None for a response that does not say, e.g. another agent's)."""
    points = []
    for response in history:
        parsed = read_response(response)
        if parsed.valid and parsed.action_type in POINT_VERBS:
            x, y = parsed.action["coordinate"][:2]
            found = _ON_SCREEN.search(response)
            points.append((x / GRID, y / GRID, found.group(1) if found else None))
    return points


def screens_of(history: Sequence[str]) -> list[str | None]:
    """The signature of the screen each response acted on (None where it names none)."""
    return [found.group(1) if (found := _ON_SCREEN.search(response)) else None for response in history]


def visit_start(history: Sequence[str], here: str | None) -> int:
    """Where the current visit to screen `here` began: the first of the trailing responses that
    acted on it (all of the history when the screen has no signature). A form filled, saved and
    opened again is a new visit: its fields are not the ones tapped the first time."""
    if here is None:
        return 0
    screens = screens_of(history)
    start = len(screens)
    while start > 0 and screens[start - 1] in (here, None):
        start -= 1
    return start


def typed_of(history: Sequence[str], here: str | None = None, *, into_form: bool = False) -> set[str]:
    """The texts the episode typed on screen `here` (`ScreenText.signature`, in any visit; every
    screen's when `here` is None, and a response that names no screen counts on all); with
    `into_form`, only those typed into a form (`FORM_MARK`). A value typed into the contact
    list's search box is not in the contact form, so the form still awaits it; the form opened
    again after a save is the same screen, so its next value is the second contact's."""
    typed = set()
    for response, on in zip(history, screens_of(history), strict=True):
        parsed = read_response(response)
        if (parsed.valid and parsed.action_type == "type" and (here is None or on in (here, None))
                and (not into_form or FORM_MARK in response)):
            typed.add(parsed.action["text"])
    return typed


def form_values(history: Sequence[str]) -> set[str]:
    """The texts the episode typed into a form (responses marked `FORM_MARK`): the values it
    entered, not the names it looked up in a list's search box. Favourite_contacts episodes
    typed a name to star into the search box in 145 of 1,652 steps; counted as entered, such a
    name turned `values_left` on for the contact card (`values_progress`), a lean toward back
    where the star is the goal."""
    return typed_of(history, into_form=True)


def action_note(verb: str, elements: Sequence[Element], target: int) -> str:
    """What a response says after its screen mark, for later steps to read: the tapped
    element's text (`tapped_note`, so they know which goal words are done: `done_words`), or,
    for a text typed on a screen of two or more edit fields, that it went into a form
    (`FORM_MARK`, `form_values`). `target` is the tapped element's index (-1: none)."""
    if verb in POINT_VERBS:
        return tapped_note(elements[target]) if target >= 0 else ""
    if verb == "type" and len(edit_fields(elements)) >= FORM_FIELDS:
        return f" {FORM_MARK}"
    return ""


def named_words(goal: Sequence[str], words: Sequence[str]) -> set[str]:
    """The goal's content words (not `STOP_WORDS`) that `words` name: the same word, or by
    trigram similarity (`match_features`'s fuzzy match) for words of `FUZZY_MIN` letters or more."""
    wanted = {w for w in goal if w not in STOP_WORDS}
    named = set()
    for word in dict.fromkeys(words):
        if word in STOP_WORDS:
            continue
        if word in wanted:
            named.add(word)
        elif len(word) >= FUZZY_MIN:
            grams = _trigrams(word)
            for other in wanted:
                if len(other) >= FUZZY_MIN:
                    g = _trigrams(other)
                    if 2 * len(grams & g) / (len(grams) + len(g)) >= 0.5:
                        named.add(other)
    return named


def tapped_note(element: Element) -> str:
    """How a response names the element it tapped (`TAPPED_MARK`); empty for an untexted one."""
    text = " ".join(element.text.replace('"', "'").split())
    return f" {TAPPED_MARK}\"{text[:MAX_NOTE]}\"" if text else ""


def done_words(goal: Sequence[str], history: Sequence[str], here: str | None = None) -> tuple[set[str], set[str]]:
    """The goal words the episode has acted on, as (reached, changed).

    *Reached*: named by an element it tapped (the text its response names after `TAPPED_MARK`)
    whose first word is a goal word, or by a text it typed or an app it opened. The first word
    is the element's title ("Mobile data T-Mobile", "Anna Li A", "Favorite"); a row that names a
    goal word only in its subtitle leads to it and is not it (tapping "Connected devices
    Bluetooth, NFC" does not turn NFC on). *Changed*: of those, the words of taps that left the
    episode on the same screen (a switch, a star: the next response, or `here` after the last
    one, names the same `ScreenText.signature`) and of typed texts; a tap that moved to another
    screen (a contact's row) opened the thing, it did not change it. Read from the policy's own
    responses only; responses that name no tapped text (another agent's) add nothing."""
    reached: set[str] = set()
    changed: set[str] = set()
    screens = [*screens_of(history), here]
    for index, response in enumerate(history):
        parsed = read_response(response)
        if not parsed.valid:
            continue
        if parsed.action_type in POINT_VERBS:
            found = _TAPPED.search(response)
            words = _WORD.findall(found.group(1).lower()) if found else []
            content = [w for w in dict.fromkeys(words) if w not in STOP_WORDS]
            if content and named_words(goal, content[:1]):
                named = named_words(goal, words)
                reached |= named
                if screens[index] is not None and screens[index] == screens[index + 1]:
                    changed |= named
        elif parsed.action_type in ("type", "open"):
            named = named_words(goal, _WORD.findall(parsed.action["text"].lower()))
            reached |= named
            if parsed.action_type == "type":
                changed |= named
    return reached, changed


def value_spans(goal: str, spans: Sequence[Span]) -> list[str]:
    """The spans that read as values to type, in the goal's order: a quoted text, or a whole
    run of capitalised or numeric words past the goal's first word ("Nora Blake", "555-0141";
    not "Nora" alone, not the sentence's opening verb)."""
    found = {span.text for span in spans if "quoted=True" in span.features}
    run: list[str] = []

    def close() -> None:
        if run and len(run) <= MAX_SPAN_WORDS:
            found.add(" ".join(run))
        run.clear()

    for i, raw in enumerate(goal.replace("\u201c", '"').split()):
        token = raw.strip(_EDGE_PUNCTUATION)
        if i > 0 and token and (token[0].isupper() or any(c.isdigit() for c in token)):
            run.append(token)
        else:
            close()
        if raw.rstrip('"\u201d').endswith((",", ";", ":", ".", "!", "?")):
            close()  # a comma ends a name: "Anna Li, Carlos Diaz" are two
    close()
    return sorted(found, key=goal.find)


def next_value(values: Sequence[str], typed: set[str]) -> str | None:
    """The goal's first value (`value_spans`, in the goal's order) not in `typed` (what the
    episode typed on this screen, `typed_of`): what a field awaiting a value takes next. A form
    lists its fields in the order a goal names their values ("Nora Blake with the number
    555-0141": the name field above the phone field), so filling the fields top down types the
    values in turn; without this, the first long runs typed a number into the empty name field
    32 times for each name."""
    return next((value for value in values if value not in typed), None)


def filled(element: Element, typed: set[str]) -> bool:
    """An edit field that shows a text the episode typed: its value is in. Its text matches
    the goal because the episode wrote it there, which is no reason to tap it again, and
    typing more into it would spoil the value."""
    return "editable" in element.flags and element.text in typed


def edit_fields(elements: Sequence[Element]) -> list[int]:
    """The indices of the screen's edit fields, top down as read."""
    return [i for i, element in enumerate(elements) if "editable" in element.flags]


def open_field(elements: Sequence[Element], typed: set[str]) -> int:
    """The index of a form's first edit field (top down) not `filled` yet; -1 on a screen with
    fewer than two fields. It is marked `pending` while the goal has a value not typed here
    (`next_value`): filled top down, a form takes the goal's values in turn, and a fresh policy
    tapped the empty contact form's name field in 7 of 100 steps there. A lone field is a
    search box over a list: it filters, it does not take the goal's values."""
    fields = edit_fields(elements)
    if len(fields) < FORM_FIELDS:
        return -1
    return next((i for i in fields if not filled(elements[i], typed)), -1)


def values_progress(values: Sequence[str], typed: set[str], elements: Sequence[Element]) -> tuple[float, float]:
    """(`values_left`, `values_typed`) of `PROGRESS_FEATURES`: on a screen with no edit field,
    whether the episode typed into forms (`typed`: `form_values`) some of the goal's values but
    not all, or all of them. A goal whose values are only looked for (names to star, typed into
    a search box at most) types none into a form: both 0."""
    done = [v in typed for v in values]
    if not any(done) or any("editable" in e.flags for e in elements):
        return 0.0, 0.0
    return float(not all(done)), float(all(done))


def awaiting_value(elements: Sequence[Element], typed: set[str]) -> bool:
    """Whether an edit field has the focus and does not hold a typed value yet (`filled`)."""
    return any({"editable", "focused"} <= e.flags and not filled(e, typed) for e in elements)


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
        raise ValueError(f"goal: {goal!r} has no words to act on")
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
        where = f" {SCREEN_MARK}{screen.signature}" if screen.signature else ""
        return encoded, where, {"screen": screen.to_json()}

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
