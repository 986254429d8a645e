"""The checks every curation write makes of the text, choices and step numbers it is given:
one clear `InvalidInput` naming the field, before anything is written. Shared by sets,
members, annotations, views, reviews and saved queries."""

from __future__ import annotations

import unicodedata

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake

#: Longest name (of a set, a view, a person, a label), in characters.
MAX_NAME = 200
#: Longest free text (a note, a description), in characters.
MAX_TEXT = 10_000


def text(value: object, field: str, max_len: int = MAX_TEXT, *, required: bool = False) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip() and not required):
        if required:
            raise InvalidInput(f"{field} is required")
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text, not {type(value).__name__}")
    value = value.strip()
    if required and not value:
        raise InvalidInput(f"{field} must not be empty")
    if len(value) > max_len:
        raise InvalidInput(f"{field} is {len(value)} characters long; the limit is {max_len}")
    # A name is one line; any text keeps out the controls (ESC, BEL, ...) that would reach a
    # terminal through `elake sql` or a log. A note may hold line breaks and tabs.
    allowed = "" if max_len <= MAX_NAME else "\n\t"
    bad = next((c for c in value if unicodedata.category(c) == "Cc" and c not in allowed), None)
    if bad is not None:
        what = "a line break" if bad in "\r\n" else f"the control character {bad!r}"
        raise InvalidInput(f"{field} holds {what}; use printable text" +
                           (" on one line" if max_len <= MAX_NAME else ""))
    return value


def required_text(value: object, field: str, max_len: int = MAX_TEXT) -> str:
    given = text(value, field, max_len, required=True)
    assert given is not None  # required: text raised instead of returning None
    return given


def choice(value: object, field: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InvalidInput(f"{field} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def step(lake: Lake, episode_id: str, step: object, field: str) -> int | None:
    if step is None:
        return None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise InvalidInput(f"{field} must be a non-negative integer, not {step!r}")
    hit = lake.sql("SELECT 1 FROM steps WHERE episode_id = ? AND step = ?", [episode_id, step]).to_pylist()
    if not hit:
        lake.episode(episode_id)  # NotFound first where the episode itself is missing
        raise InvalidInput(f"{field}: episode {episode_id!r} has no step {step}")
    return step
