"""Checks an action (the parsed ``arguments`` of a MAI-UI ``mobile_use`` tool call) and turns
it into a typed :class:`Action` in logical pixels, or says precisely why it cannot run.

The vocabulary is FORMATS.md section 3. Coordinates are integers or floats on the agents'
0..999 scale; anything outside it is off the screen. ``drag`` accepts both the camelCase
keys the reference viewer expects and the snake_case keys agents emit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from episodelake.collectors.envs.sim.geometry import COORD_MAX, to_pixels

ACTION_TYPES = ("click", "long_press", "double_tap", "swipe", "drag", "type", "open", "system_button",
                "wait", "terminate", "answer")
DIRECTIONS = ("up", "down", "left", "right")
BUTTONS = ("back", "home", "menu", "enter")
STATUSES = ("success", "fail")


class InvalidAction(ValueError):
    """The action cannot be executed; the message is the step's recorded reason."""


@dataclass(frozen=True)
class Action:
    type: str
    point: tuple[float, float] | None = None  # logical px: click target, swipe or drag start
    end: tuple[float, float] | None = None  # logical px: drag end
    direction: str | None = None
    text: str | None = None
    button: str | None = None
    status: str | None = None


def validate(arguments: object) -> Action:
    if not isinstance(arguments, Mapping):
        raise InvalidAction(f"action must be a JSON object of arguments, got {type(arguments).__name__}")
    kind = arguments.get("action")
    if kind not in ACTION_TYPES:
        raise InvalidAction(f"unknown action {kind!r}; expected one of {', '.join(ACTION_TYPES)}")
    if kind in ("click", "long_press", "double_tap"):
        return Action(kind, point=_point(arguments, "coordinate"))
    if kind == "swipe":
        direction = _choice(arguments, "direction", DIRECTIONS)
        point = _point(arguments, "coordinate") if arguments.get("coordinate") is not None else None
        return Action(kind, point=point, direction=direction)
    if kind == "drag":
        start_key = "startCoordinate" if "startCoordinate" in arguments else "start_coordinate"
        end_key = "endCoordinate" if "endCoordinate" in arguments else "end_coordinate"
        return Action(kind, point=_point(arguments, start_key), end=_point(arguments, end_key))
    if kind in ("type", "open", "answer"):
        text = arguments.get("text")
        if not isinstance(text, str):
            raise InvalidAction(f"{kind} needs a string 'text' argument")
        if kind == "open" and not text.strip():
            raise InvalidAction("open needs the app name in 'text'")
        return Action(kind, text=text)
    if kind == "system_button":
        return Action(kind, button=_choice(arguments, "button", BUTTONS))
    if kind == "terminate":
        return Action(kind, status=_choice(arguments, "status", STATUSES))
    return Action(kind)


def _point(arguments: Mapping, key: str) -> tuple[float, float]:
    value = arguments.get(key)
    if value is None:
        raise InvalidAction(f"{arguments['action']} needs '{key}' as [x, y]")
    if (not isinstance(value, list | tuple) or len(value) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)):
        raise InvalidAction(f"'{key}' must be [x, y] with two numbers, got {value!r}")
    x, y = value
    if not (0 <= x <= COORD_MAX and 0 <= y <= COORD_MAX):
        raise InvalidAction(f"'{key}' {list(value)} is outside the screen (0..{COORD_MAX} on each axis)")
    return to_pixels(x, y)


def _choice(arguments: Mapping, key: str, allowed: tuple[str, ...]) -> str:
    value = arguments.get(key)
    if isinstance(value, str) and value.lower() in allowed:
        return value.lower()
    raise InvalidAction(f"{arguments['action']} needs '{key}' in {', '.join(allowed)}, got {value!r}")
