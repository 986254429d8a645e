"""UI-TARS: ``Thought: ...`` then ``Action: click(start_box='(x,y)')`` on a 0-1000 scale.

Responses: ``click(start_box='(x,y)')`` (or ``point='<point>x y</point>'``, or a 4-number
box, whose centre is taken), ``long_press``, ``left_double``, ``drag(start_box, end_box)``,
``type(content='')``, ``scroll(direction=...)``, ``open_app(app_name='')``, ``press_home()``,
``press_back()``, ``hotkey(key='enter')``, ``wait()``, ``finished()``. ``scroll`` names where
the view moves, so ``scroll(direction='down')`` is a finger swipe ``up``. No prompt layout of
its own.
"""

from __future__ import annotations

import re
from typing import Any

from episodelake.lake.vocab.action_space import NUMBER, POINT_ACTIONS, to_number
from episodelake.lake.vocab.families.base import (
    CoordinateScale,
    ModelFamily,
    ParsedAction,
    fallback,
    normalise_arguments,
    unparsed,
)

UI_TARS_SCALE = CoordinateScale(1000, 1000, 1000, 1000)

_UI_TARS_ACTION = re.compile(r"Action\s*:\s*([a-z_]+)\s*\((.*)", re.DOTALL)
_UI_TARS_DETECT = re.compile(r"Action\s*:\s*[a-z_]+\s*\(\s*(?:\)|[a-z_]+\s*=)")
_UI_TARS_ARG = re.compile(r"""(\w+)\s*=\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")""", re.DOTALL)
_UI_TARS_THOUGHT = re.compile(r"^\s*Thought\s*:\s*", re.IGNORECASE)
_UI_TARS_SIMPLE = {
    "click": "click",
    "left_single": "click",
    "left_double": "double_tap",
    "double_click": "double_tap",
    "long_press": "long_press",
    "type": "type",
    "open_app": "open",
    "wait": "wait",
}
_UI_TARS_KEYS = {"press_home": "home", "press_back": "back", "press_enter": "enter"}
_SCROLL_TO_SWIPE = {"down": "up", "up": "down", "left": "right", "right": "left"}


def parse(text: str, image_size: tuple[int, int] | None) -> ParsedAction:
    match = _UI_TARS_ACTION.search(text)
    thinking = _UI_TARS_THOUGHT.sub("", text[: match.start()] if match else "").strip() or None
    if match is None:
        return fallback(text, UI_TARS_SCALE, thinking, "no 'Action: name(...)' line", "ui-tars")
    name = match.group(1).lower()
    kwargs = {
        key: _unescape(single if single else double)
        for key, single, double in _UI_TARS_ARG.findall(match.group(2))
    }
    arguments, problem = _ui_tars_arguments(name, kwargs)
    if arguments is None:
        assert problem is not None  # no arguments always comes with the reason
        return unparsed(
            problem, thinking=thinking, action={"action": name, **kwargs}, fmt="ui-tars"
        )
    return normalise_arguments(arguments, scale=UI_TARS_SCALE, fmt="ui-tars", thinking=thinking)


def _ui_tars_arguments(name: str, kwargs: dict[str, str]) -> tuple[dict | None, str | None]:
    """UI-TARS keyword arguments in our vocabulary (numbers still on UI-TARS's scale)."""
    start = kwargs.get("start_box", kwargs.get("point", kwargs.get("start_point")))
    end = kwargs.get("end_box", kwargs.get("end_point"))
    if name in _UI_TARS_SIMPLE:
        ours = _UI_TARS_SIMPLE[name]
        args: dict[str, Any] = {
            "action": ours,
            "text": kwargs.get("content", kwargs.get("app_name")),
        }
        if ours in POINT_ACTIONS:
            args = {"action": ours, "coordinate": _box_point(start)}
        return args, None
    if name == "drag":
        return {
            "action": "drag",
            "start_coordinate": _box_point(start),
            "end_coordinate": _box_point(end),
        }, None
    if name == "scroll":
        direction = kwargs.get("direction", "").strip().lower()
        return {
            "action": "swipe",
            "direction": _SCROLL_TO_SWIPE.get(direction, direction or None),
            "coordinate": _box_point(start),
        }, None
    if name in _UI_TARS_KEYS:
        return {"action": "system_button", "button": _UI_TARS_KEYS[name]}, None
    if name == "hotkey":
        return {"action": "system_button", "button": kwargs.get("key")}, None
    if name == "finished":
        return {"action": "terminate", "status": "success"}, None
    return None, f"unsupported UI-TARS action {name!r}"


def _box_point(value: str | None) -> Any:
    """A UI-TARS box or point as [x, y]: two numbers as is, four as the box's centre."""
    if value is None:
        return None
    numbers = [to_number(n) for n in re.findall(NUMBER, value)]
    if len(numbers) == 2:
        return numbers
    if len(numbers) == 4:
        return [(numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2]
    return value


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def detect(text: str) -> bool:
    return bool(_UI_TARS_DETECT.search(text))


FAMILY = ModelFamily(
    name="ui-tars",
    summary="`Thought:` then `Action: click(start_box=...)`",
    doc=__doc__,
    parse=parse,
    detect=detect,
    example="Thought: The clock app is on the home screen.\nAction: click(start_box='(500,300)')",
)
