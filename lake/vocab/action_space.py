"""The action space: what ``steps.action_type`` and ``steps.action`` hold, and how a stored
action reads as one line of text.

The stored action record
------------------------
``action_type`` is one of :data:`ACTION_TYPES`, or ``unparsed``. ``action`` holds the
arguments in the MAI-UI vocabulary with snake_case keys; coordinates are on the 0-999 grid
(:data:`GRID`) whatever scale the model used (the exact position is in ``x``/``y``)::

    click, long_press, double_tap   {"action": ..., "coordinate": [x, y]}
    swipe                           {"action": "swipe", "direction": up|down|left|right,
                                     "coordinate": [x, y]}          (coordinate optional)
    drag                            {"action": "drag", "start_coordinate": [x, y],
                                     "end_coordinate": [x, y]}
    type, open, answer              {"action": ..., "text": "..."}
    system_button                   {"action": "system_button", "button": back|home|menu|enter}
    wait                            {"action": "wait"}
    terminate                       {"action": "terminate", "status": success|fail}

``x, y`` are the action's point (a swipe's start, a drag's start) and ``x2, y2`` a drag's end,
as fractions of the screenshot's width and height, clamped into [0, 1].

This lives in the lake because everything that reads stored steps needs it (the prompts the
exports rebuild, the web app's summaries, the judge); the model families' response parsers
(:mod:`episodelake.lake.vocab.families`) write it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

ACTION_TYPES = (
    "click",
    "long_press",
    "double_tap",
    "swipe",
    "drag",
    "type",
    "open",
    "system_button",
    "wait",
    "terminate",
    "answer",
)
UNPARSED = "unparsed"
DIRECTIONS = ("up", "down", "left", "right")
BUTTONS = ("back", "home", "menu", "enter")
STATUSES = ("success", "fail")

#: The MAI-UI grid: coordinates are numbers in [0, GRID], divided by GRID by the environment.
GRID = 999

#: Actions whose one argument is a point, and those whose one argument is text.
POINT_ACTIONS = ("click", "long_press", "double_tap")
TEXT_ACTIONS = ("type", "open", "answer")

#: A number as models write it in text: an optional sign, digits, an optional fraction.
NUMBER = r"(-?\d+(?:\.\d+)?)"


def action_summary(action_type: str | None, action: Mapping[str, Any] | str | None) -> str:
    """One line for people: ``click (512, 300)``, ``type 'hello'``, ``swipe up from (5, 9)``.

    `action` may be the stored JSON text. Missing arguments show as ``?``.
    """
    if isinstance(action, str):
        try:
            action = json.loads(action)
        except json.JSONDecodeError:
            action = {}
    args = action if isinstance(action, Mapping) else {}
    kind = action_type or args.get("action") or UNPARSED
    if kind in POINT_ACTIONS:
        return f"{kind} {_point_text(args.get('coordinate'))}"
    if kind == "swipe":
        start = args.get("coordinate")
        where = f" from {_point_text(start)}" if start is not None else ""
        return f"swipe {args.get('direction', '?')}{where}"
    if kind == "drag":
        start, end = args.get("start_coordinate"), args.get("end_coordinate")
        return f"drag {_point_text(start)} -> {_point_text(end)}"
    if kind in TEXT_ACTIONS:
        return f"{kind} {_quoted(args.get('text'))}"
    if kind == "system_button":
        return f"system_button {args.get('button', '?')}"
    if kind == "terminate":
        return f"terminate {args.get('status', '?')}"
    return str(kind)


def _point_text(value: Any) -> str:
    pair = number_pair(value)
    return f"({number_text(pair[0])}, {number_text(pair[1])})" if pair else "(?)"


def _quoted(value: Any, limit: int = 60) -> str:
    if not isinstance(value, str):
        return "?"
    flat = " ".join(value.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")


def number_pair(value: Any) -> tuple[float, float] | None:
    """[x, y] from a list/tuple of two numbers or a string holding exactly two numbers."""
    if isinstance(value, str):
        numbers = re.findall(NUMBER, value)
        value = [to_number(n) for n in numbers]
    if isinstance(value, list | tuple) and len(value) == 2:
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            if all(v == v and abs(v) != float("inf") for v in value):
                return value[0], value[1]
    return None


def to_number(text: str) -> int | float:
    """A number matched by :data:`NUMBER`, an int when it has no fraction."""
    return float(text) if "." in text else int(text)


def number_text(value: float) -> str:
    """``12`` for 12.0, ``12.5`` for 12.5: coordinates as people write them."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
