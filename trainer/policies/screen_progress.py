"""What the screen policy reads of the episode so far, from its own earlier responses.

A response names the screen it acted on (`SCREEN_MARK` and the screen's signature), the text
of the element it tapped (`TAPPED_MARK`) and whether a typed text went into a form
(`FORM_MARK`). From those, and from how an element's words match the goal's, come the
features that say what is done and what is left: which goal words were reached and changed
(`done_words`), which values were typed where (`typed_of`, `form_values`), which value and
which form field come next (`next_value`, `open_field`). A response that names none of it
(another agent's) adds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from episodelake.lake.vocab.action_space import GRID
from episodelake.trainer.policies.screen_read import SIGNATURE_HEX, Element
from episodelake.trainer.policies.small import POINT_VERBS, Span, read_response
from episodelake.trainer.policies.tiny import _EDGE_PUNCTUATION, MAX_SPAN_WORDS

#: Goal words that say what to do, not what to look for; they match nothing on screen.
STOP_WORDS = frozenset({"a", "an", "the", "to", "and", "then", "with", "of", "in", "on", "off", "for",
                        "turn", "add", "set", "put", "one", "two", "it", "is", "my"})
#: Words shorter than this are matched exactly only, never by trigrams.
FUZZY_MIN = 4
#: How a response names the screen it acted on (then its `ScreenText.signature`).
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


def screen_note(signature: str | None) -> str:
    """How a response names the screen it acted on (`SCREEN_MARK` and its
    `ScreenText.signature`, read back by `screens_of`); empty for a screen without one."""
    return f" {SCREEN_MARK}{signature}" if signature else ""


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
