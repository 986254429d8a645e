"""Our action record <-> the environment server's ``JSONAction`` (MobileWorld / ClawGUI-Server).

The server speaks device pixels and its own action names (``input_text``, ``open_app``,
``navigate_back``, ``status``...). The client converts with the screen size the server
reported at ``/init`` (the reference hard-codes 1080x2400 instead); the server converts back
with the same size, so a point survives the round trip exactly. Both directions live here so
that the client and our sim server cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from episodelake.collectors.envs.base import Screen
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.families import CoordinateScale, ParsedAction, normalise_arguments

#: Our system buttons and the server's action types for them.
BUTTON_ACTIONS = {"back": "navigate_back", "home": "navigate_home", "menu": "app_switch",
                  "enter": "keyboard_enter"}
#: Every ``action_type`` the server accepts.
ACTION_TYPES = ("click", "long_press", "double_tap", "input_text", "swipe", "drag", "open_app",
                *BUTTON_ACTIONS.values(), "wait", "status", "answer")


def to_json_action(action: ParsedAction, screen: Screen) -> dict[str, Any]:
    """The server's JSONAction for a valid action, points in `screen` pixels."""
    if not action.valid:
        raise InvalidInput(f"only valid actions go to a device; this one is not: {action.error}")
    kind, args = action.action_type, action.action
    if kind in ("click", "long_press", "double_tap"):
        x, y = screen.pixel(*action.point())
        return {"action_type": kind, "x": x, "y": y}
    if kind == "swipe":
        out: dict[str, Any] = {"action_type": "swipe", "direction": args["direction"]}
        if action.x is not None:
            out["x"], out["y"] = screen.pixel(*action.point())
        return out
    if kind == "drag":
        sx, sy = screen.pixel(*action.point())
        ex, ey = screen.pixel(*action.end_point())
        return {"action_type": "drag", "start_x": sx, "start_y": sy, "end_x": ex, "end_y": ey}
    if kind == "type":
        return {"action_type": "input_text", "text": args["text"]}
    if kind == "open":
        return {"action_type": "open_app", "app_name": args["text"]}
    if kind == "answer":
        return {"action_type": "answer", "text": args["text"]}
    if kind == "system_button":
        return {"action_type": BUTTON_ACTIONS[args["button"]]}
    if kind == "terminate":
        return {"action_type": "status", "goal_status": args["status"]}
    if kind == "wait":
        return {"action_type": "wait"}
    raise ValueError(f"no JSONAction for action type {kind!r}")


def from_json_action(body: dict[str, Any], screen: Screen) -> ParsedAction:
    """Read a JSONAction sent to the server; an invalid one comes back with ``valid`` False
    and the reason in ``error``."""
    kind = body.get("action_type")
    if kind not in ACTION_TYPES:
        raise InvalidInput(f"action_type {kind!r} is not one of {', '.join(ACTION_TYPES)}")
    args: dict[str, Any]
    if kind in ("click", "long_press", "double_tap"):
        args = {"action": kind, "coordinate": _pair(body, "x", "y")}
    elif kind == "swipe":
        args = {"action": "swipe", "direction": body.get("direction")}
        if body.get("x") is not None or body.get("y") is not None:
            args["coordinate"] = _pair(body, "x", "y")
    elif kind == "drag":
        args = {"action": "drag", "start_coordinate": _pair(body, "start_x", "start_y"),
                "end_coordinate": _pair(body, "end_x", "end_y")}
    elif kind == "input_text":
        args = {"action": "type", "text": body.get("text")}
    elif kind == "open_app":
        args = {"action": "open", "text": body.get("app_name")}
    elif kind == "answer":
        args = {"action": "answer", "text": body.get("text")}
    elif kind == "status":
        args = {"action": "terminate", "status": body.get("goal_status")}
    elif kind == "wait":
        args = {"action": "wait"}
    else:
        button = next(b for b, name in BUTTON_ACTIONS.items() if name == kind)
        args = {"action": "system_button", "button": button}
    scale = CoordinateScale.pixels(screen.width, screen.height)
    return normalise_arguments(args, scale=scale, fmt="json-action")


def _pair(body: dict[str, Any], kx: str, ky: str) -> list[Any] | None:
    x, y = body.get(kx), body.get(ky)
    return None if x is None and y is None else [x, y]
