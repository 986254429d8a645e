"""Agent responses to action records, and action records back to response text.

Every path that reads a model response (the recorder, the ClawGUI importer, the API, the
trainer's policies) goes through :func:`parse_response`, so one response means the same action
everywhere, and a response that cannot be read is stored as ``unparsed`` with the reason
instead of being guessed into a ``wait`` as the reference framework does.

The action record
-----------------
Responses become the stored action record described in :mod:`episodelake.lake.action_space`
(``action_type``, ``action`` in the MAI-UI vocabulary on the 0-999 grid, ``x, y, x2, y2`` as
fractions of the screenshot). A coordinate outside its format's range makes the action
invalid, with the reason in ``error``; the clamped point is kept so a viewer can still show
where the model pointed. An action with a missing or bad argument keeps its ``action_type``
and is marked invalid with an error such as ``"click: missing 'coordinate'"``.

Formats
-------
``mai-ui``
    ``<thinking>...</thinking>`` then ``<tool_call>{"name": "mobile_use", "arguments":
    {...}}</tool_call>``. ``arguments`` may be an object, a JSON string, or absent (the action
    at the top level). Coordinates on the 0-999 grid. camelCase keys (``startCoordinate``) are
    read as snake_case. The default, and what :func:`format_tool_call` writes.
``gui-owl``
    An ``Action: <description>`` line, then the same tool call. Its prompt calls the screen
    1000x1000 while the environment divides by 999, so 1000 is accepted (and clamped).
    ``swipe`` with ``coordinate`` and ``coordinate2`` is a drag; ``terminate`` status
    ``failure`` is ``fail``. Detected by the ``Action:`` line or those arguments.
``qwen-vl``
    Qwen-VL's ``mobile_use`` / ``computer_use`` tool call, coordinates in absolute pixels of
    the image the model saw: pass ``image_size=(width, height)``; without it a coordinate
    cannot be placed and the action is invalid. ``left_click``, ``double_click``, ``key`` with
    a system key, and Back/Home/Menu/Enter buttons map onto our actions. A ``mobile_use`` call
    looks exactly like MAI-UI's, so auto-detection only picks this format for
    ``computer_use``; collectors that run a Qwen-VL model pass ``fmt="qwen-vl"``.
``ui-tars``
    ``Thought: ...`` then ``Action: click(start_box='(x,y)')`` (or ``point='<point>x
    y</point>'``, or a 4-number box, whose centre is taken), ``long_press``, ``left_double``,
    ``drag(start_box, end_box)``, ``type(content='')``, ``scroll(direction=...)``,
    ``open_app(app_name='')``, ``press_home()``, ``press_back()``, ``hotkey(key='enter')``,
    ``wait()``, ``finished()``; coordinates on a 0-1000 scale. ``scroll`` names where the view
    moves, so ``scroll(direction='down')`` is a finger swipe ``up``.

Fallbacks
---------
When a format's structure is broken, and only then: the JSON is retried with fullwidth
punctuation made ASCII, trailing text after the object dropped, and missing closing braces
added; then the text outside ``<thinking>`` (or the broken tool call's body) is searched for
``click(x, y)`` and ``click at x, y`` (also tap, long_press, double_tap). A fallback is used
only when it finds exactly one distinct action; two different candidates make the response
``unparsed`` with both named. Fallback results carry ``fmt="fallback"``.

Adding a format
---------------
``register_format(name, parser, detect=...)``: ``parser(text, image_size)`` returns a
:class:`ParsedAction` (use :func:`parse_tool_call_text` or :func:`normalise_arguments` with a
:class:`CoordinateScale` to share the validation); ``detect(text)`` says whether
``fmt="auto"`` should use it. Formats are tried in registration order. Document each new
format under *Formats* above: a test checks that every registered name appears there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from episodelake.lake.action_space import (
    ACTION_TYPES,
    BUTTONS,
    DIRECTIONS,
    GRID,
    NUMBER,
    POINT_ACTIONS,
    STATUSES,
    TEXT_ACTIONS,
    UNPARSED,
    action_summary,
    number_pair,
    number_text,
    to_number,
)
from episodelake.lake.prompts import HistoryStep

#: Other agents' names for our actions (Qwen-VL, GUI-Owl, common variants).
_ACTION_ALIASES = {
    "tap": "click",
    "left_click": "click",
    "double_click": "double_tap",
    "long_click": "long_press",
    "input": "type",
    "input_text": "type",
    "open_app": "open",
    "navigate_back": "system_button",
    "navigate_home": "system_button",
}
_ALIAS_BUTTONS = {"navigate_back": "back", "navigate_home": "home"}
_STATUS_ALIASES = {"success": "success", "fail": "fail", "failure": "fail", "failed": "fail"}


@dataclass(frozen=True, kw_only=True)
class ParsedAction:
    """One response read as an action: what the steps table stores about it."""

    thinking: str | None
    action_type: str
    action: dict[str, Any] = field(default_factory=dict)
    valid: bool
    error: str | None = None
    x: float | None = None
    y: float | None = None
    x2: float | None = None
    y2: float | None = None
    #: The format that read the response (``"fallback"`` when a fallback did).
    fmt: str | None = None

    def to_row(self) -> dict[str, Any]:
        """The steps columns this action fills (``action`` as JSON text)."""
        return {
            "thinking": self.thinking,
            "action_type": self.action_type,
            "action": json.dumps(self.action, ensure_ascii=False),
            "action_valid": self.valid,
            "action_error": self.error,
            "x": self.x,
            "y": self.y,
            "x2": self.x2,
            "y2": self.y2,
        }


@dataclass(frozen=True)
class CoordinateScale:
    """How a format's numbers map onto the screen: ``x / width_units`` is the fraction.

    ``max_x``/``max_y`` are the largest values accepted as valid; they may exceed the units
    when a prompt told the model a slightly different range (GUI-Owl's 1000 over a 999 grid).
    """

    width_units: float
    height_units: float
    max_x: float
    max_y: float

    @classmethod
    def pixels(cls, width: int, height: int) -> CoordinateScale:
        return cls(width, height, width, height)

    @property
    def is_grid(self) -> bool:
        """Numbers already on our 0-999 grid are stored as the model wrote them."""
        return self.width_units == GRID and self.height_units == GRID


MAI_UI_SCALE = CoordinateScale(GRID, GRID, GRID, GRID)
GUI_OWL_SCALE = CoordinateScale(GRID, GRID, 1000, 1000)
UI_TARS_SCALE = CoordinateScale(1000, 1000, 1000, 1000)

#: ``parser(text, image_size) -> ParsedAction``.
FormatParser = Callable[[str, tuple[int, int] | None], ParsedAction]


@dataclass(frozen=True)
class _Format:
    parse: FormatParser
    detect: Callable[[str], bool] | None


_FORMATS: dict[str, _Format] = {}


def register_format(
    name: str,
    parser: FormatParser,
    *,
    detect: Callable[[str], bool] | None = None,
    replace: bool = False,
) -> None:
    """Add a response format. Without `detect` it is used only when asked for by name."""
    if name == "auto":
        raise ValueError("'auto' is reserved for format detection; pick another name")
    if name in _FORMATS and not replace:
        raise ValueError(f"action format {name!r} is already registered; pass replace=True")
    _FORMATS[name] = _Format(parser, detect)


def formats() -> list[str]:
    """Registered format names, in the order auto-detection tries them."""
    return list(_FORMATS)


def parse_response(
    text: str, *, fmt: str = "auto", image_size: tuple[int, int] | None = None
) -> ParsedAction:
    """Read one model response. Never raises for bad model output: see ``error`` instead.

    `image_size` is (width, height) of the image the model saw; only formats with pixel
    coordinates (``qwen-vl``) need it.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected str, not {type(text).__name__}")
    if fmt != "auto" and fmt not in _FORMATS:
        raise ValueError(f"fmt: unknown action format {fmt!r}; registered: {formats()}")
    if image_size is not None:
        width, height = image_size
        if width <= 0 or height <= 0:
            raise ValueError(f"image_size: width and height must be positive, got {image_size}")
    if not text.strip():
        return unparsed("empty response")
    if fmt == "auto":
        fmt = next(
            (name for name, f in _FORMATS.items() if f.detect is not None and f.detect(text)),
            "mai-ui",
        )
    return _FORMATS[fmt].parse(text, image_size)


def unparsed(
    error: str, *, thinking: str | None = None, action: dict | None = None, fmt: str | None = None
) -> ParsedAction:
    """A response that holds no usable action; `action` keeps whatever arguments were read."""
    return ParsedAction(
        thinking=thinking,
        action_type=UNPARSED,
        action=action or {},
        valid=False,
        error=error,
        fmt=fmt,
    )


# ---------------------------------------------------------------------------------------------
# Arguments -> action record (shared by every format)


def normalise_arguments(
    arguments: Mapping[str, Any],
    *,
    scale: CoordinateScale | None,
    fmt: str,
    thinking: str | None = None,
) -> ParsedAction:
    """Validate tool-call style arguments and express them in our vocabulary.

    `scale` None means the format's coordinates cannot be placed (pixels without an image
    size): an action that needs a coordinate is then invalid.
    """
    args = {_snake_case(str(key)): value for key, value in arguments.items()}
    raw_name = args.get("action")
    if not isinstance(raw_name, str) or not raw_name.strip():
        return unparsed(
            "missing 'action' in the tool call", thinking=thinking, action=args, fmt=fmt
        )
    name = raw_name.strip().lower()
    if name in _ALIAS_BUTTONS:
        args.setdefault("button", _ALIAS_BUTTONS[name])
    if name == "key":
        args.setdefault("button", _key_name(args))
    name = "system_button" if name == "key" else _ACTION_ALIASES.get(name, name)
    if name == "swipe" and "coordinate2" in args:
        name = "drag"
        args["start_coordinate"] = args.get("coordinate")
        args["end_coordinate"] = args["coordinate2"]
    if name not in ACTION_TYPES:
        return unparsed(
            f"unknown action {raw_name!r}; expected one of {', '.join(ACTION_TYPES)}",
            thinking=thinking,
            action=args,
            fmt=fmt,
        )
    build = _Builder(name, scale)
    _BUILDERS[name](build, args)
    return build.result(thinking, fmt)


def _key_name(args: dict) -> Any:
    """The key a ``key`` action presses: Qwen-VL writes ``text`` or a one-element ``keys``."""
    keys = args.get("keys")
    if isinstance(keys, list) and len(keys) == 1:
        return keys[0]
    return args.get("text", args.get("key", keys))


class _Builder:
    """Collects one action's canonical arguments, its points and its first error."""

    def __init__(self, name: str, scale: CoordinateScale | None) -> None:
        self.name = name
        self.scale = scale
        self.action: dict[str, Any] = {"action": name}
        self.points: list[tuple[float, float] | None] = []
        self.error: str | None = None

    def fail(self, message: str) -> None:
        if self.error is None:
            self.error = f"{self.name}: {message}"

    def point(self, key: str, value: Any, *, required: bool = True) -> None:
        """Read ``value`` as [x, y], store it under `key`, remember its fraction of the screen."""
        if value is None:
            if required:
                self.fail(f"missing {key!r}")
                self.points.append(None)
            return
        pair = number_pair(value)
        if pair is None:
            self.fail(f"{key!r} must be two numbers [x, y], got {value!r}")
            self.action[key] = value
            self.points.append(None)
            return
        if self.scale is None:
            self.fail(
                f"{key!r} is in pixels of the image the model saw; pass image_size=(width, height)"
            )
            self.action[key] = list(pair)
            self.points.append(None)
            return
        x, y = pair
        scale = self.scale
        in_range = True
        for axis, v, top in (("x", x, scale.max_x), ("y", y, scale.max_y)):
            if not 0 <= v <= top:
                in_range = False
                self.fail(f"{axis}={number_text(v)} in {key!r} is outside [0, {number_text(top)}]")
        fx = _clamp(x / scale.width_units)
        fy = _clamp(y / scale.height_units)
        if not in_range or (scale.is_grid and x <= GRID and y <= GRID):
            self.action[key] = [x, y]
        else:
            self.action[key] = [round(fx * GRID), round(fy * GRID)]
        self.points.append((fx, fy))

    def choice(self, key: str, value: Any, allowed: tuple[str, ...], aliases=None) -> None:
        if value is None:
            self.fail(f"missing {key!r}")
            return
        word = value.strip().lower() if isinstance(value, str) else value
        if isinstance(word, str) and word.startswith("keycode_"):
            word = word.removeprefix("keycode_")
        word = (aliases or {}).get(word, word)
        if word not in allowed:
            self.fail(f"{key!r} must be one of {', '.join(allowed)}, got {value!r}")
            self.action[key] = value
            return
        self.action[key] = word

    def text(self, value: Any) -> None:
        if value is None:
            self.fail("missing 'text'")
        elif not isinstance(value, str):
            self.fail(f"'text' must be a string, got {value!r}")
            self.action["text"] = value
        elif not value.strip():
            self.fail("'text' is empty")
            self.action["text"] = value
        else:
            self.action["text"] = value

    def result(self, thinking: str | None, fmt: str) -> ParsedAction:
        first = self.points[0] if self.points else None
        second = self.points[1] if len(self.points) > 1 else None
        return ParsedAction(
            thinking=thinking,
            action_type=self.name,
            action=self.action,
            valid=self.error is None,
            error=self.error,
            x=first[0] if first else None,
            y=first[1] if first else None,
            x2=second[0] if second else None,
            y2=second[1] if second else None,
            fmt=fmt,
        )


def _build_point(b: _Builder, args: dict) -> None:
    b.point("coordinate", args.get("coordinate"))


def _build_swipe(b: _Builder, args: dict) -> None:
    b.choice("direction", args.get("direction"), DIRECTIONS)
    b.point("coordinate", args.get("coordinate"), required=False)


def _build_drag(b: _Builder, args: dict) -> None:
    b.point("start_coordinate", args.get("start_coordinate"))
    b.point("end_coordinate", args.get("end_coordinate"))


def _build_text(b: _Builder, args: dict) -> None:
    for key in ("text", "content", "app_name", "app"):
        if key in args:
            b.text(args[key])
            return
    b.text(None)


def _build_button(b: _Builder, args: dict) -> None:
    b.choice("button", args.get("button"), BUTTONS)


def _build_wait(b: _Builder, args: dict) -> None:
    """Nothing to read: a wait has no arguments we keep."""


def _build_terminate(b: _Builder, args: dict) -> None:
    b.choice("status", args.get("status"), STATUSES, _STATUS_ALIASES)


_BUILDERS: dict[str, Callable[[_Builder, dict], None]] = {
    **{name: _build_point for name in POINT_ACTIONS},
    **{name: _build_text for name in TEXT_ACTIONS},
    "swipe": _build_swipe,
    "drag": _build_drag,
    "system_button": _build_button,
    "wait": _build_wait,
    "terminate": _build_terminate,
}


# ---------------------------------------------------------------------------------------------
# Tool-call formats (mai-ui, gui-owl, qwen-vl)

_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_THINKING = re.compile(r"<(thinking|think)>(.*?)(?:</\1>|(?=<tool_call>)|$)", re.DOTALL)
_ACTION_LINE = re.compile(r"^\s*Action\s*:", re.MULTILINE)
_CODE_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def parse_tool_call_text(text: str, *, scale: CoordinateScale | None, fmt: str) -> ParsedAction:
    """Read the first ``<tool_call>`` of `text` (or fall back) and validate it on `scale`."""
    thinking = _thinking(text)
    match = _TOOL_CALL.search(text)
    if match is None:
        return _fallback(_outside_thinking(text), scale, thinking, "no <tool_call> block", fmt)
    body = _CODE_FENCE.sub("", match.group(1).strip())
    call, problem = _load_json_object(body)
    if call is None:
        return _fallback(body, scale, thinking, f"tool call is not valid JSON ({problem})", fmt)
    arguments = call.get("arguments", call)
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return unparsed(
                f"tool call 'arguments' is a string that is not JSON ({exc.msg})",
                thinking=thinking,
                fmt=fmt,
            )
    if not isinstance(arguments, Mapping):
        return unparsed(
            f"tool call 'arguments' must be an object, got {type(arguments).__name__}",
            thinking=thinking,
            fmt=fmt,
        )
    return normalise_arguments(arguments, scale=scale, fmt=fmt, thinking=thinking)


def _thinking(text: str) -> str | None:
    """The thinking block; else, for tool-call formats, whatever precedes the tool call."""
    match = _THINKING.search(text)
    if match:
        return match.group(2).strip() or None
    head, found, _ = text.partition("<tool_call>")
    return (head.strip() or None) if found else None


def _outside_thinking(text: str) -> str:
    return _THINKING.sub(" ", text)


def _load_json_object(body: str) -> tuple[dict | None, str | None]:
    """Parse `body` as one JSON object, repairing only what has a single reading."""
    first_error = None
    for candidate in (body, _ascii_punctuation(body)):
        start = candidate.find("{")
        if start < 0:
            first_error = first_error or "no '{' in the tool call"
            continue
        candidate = candidate[start:]
        for closing in ("", "}", "}}", "}}}"):
            try:
                value, _ = json.JSONDecoder().raw_decode(candidate + closing)
            except json.JSONDecodeError as exc:
                first_error = first_error or f"{exc.msg} at char {exc.pos}"
                continue
            if isinstance(value, dict):
                return value, None
            return None, f"expected an object, got {type(value).__name__}"
    return None, first_error


_FULLWIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
_FULLWIDTH.update({0x3000: ord(" "), 0x3001: ord(","), 0x3010: ord("["), 0x3011: ord("]")})
_FULLWIDTH.update({0x201C: ord('"'), 0x201D: ord('"'), 0x2018: ord("'"), 0x2019: ord("'")})


def _ascii_punctuation(text: str) -> str:
    """Fullwidth and curly punctuation as ASCII (models writing Chinese slip into them)."""
    return text.translate(_FULLWIDTH)


# ---------------------------------------------------------------------------------------------
# Fallbacks for broken structure

_POINT_VERB = r"(click|tap|long[ _]press|double[ _]tap)"
_FALLBACK_PATTERNS = (
    re.compile(rf"\b{_POINT_VERB}\s*\(\s*{NUMBER}\s*,\s*{NUMBER}\s*\)", re.IGNORECASE),
    re.compile(
        rf"\b{_POINT_VERB}\s+(?:at|on)\s*[(\[]?\s*{NUMBER}\s*,\s*{NUMBER}\s*[)\]]?",
        re.IGNORECASE,
    ),
)


def _fallback(
    text: str, scale: CoordinateScale | None, thinking: str | None, why: str, fmt: str
) -> ParsedAction:
    """Recover an action from free text when exactly one distinct candidate is present."""
    text = _ascii_punctuation(text)
    candidates: dict[tuple, dict] = {}
    for pattern in _FALLBACK_PATTERNS:
        for verb, x, y in pattern.findall(text):
            name = _ACTION_ALIASES.get(
                verb.lower().replace(" ", "_"), verb.lower().replace(" ", "_")
            )
            point = [to_number(x), to_number(y)]
            candidates[(name, *point)] = {"action": name, "coordinate": point}
    if not candidates:
        return unparsed(f"{why}, and no action found in the text", thinking=thinking, fmt=fmt)
    if len(candidates) > 1:
        found = "; ".join(action_summary(a["action"], a) for a in candidates.values())
        return unparsed(
            f"{why}, and the text names several actions: {found}", thinking=thinking, fmt=fmt
        )
    (arguments,) = candidates.values()
    return normalise_arguments(arguments, scale=scale, fmt="fallback", thinking=thinking)


# ---------------------------------------------------------------------------------------------
# UI-TARS

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


def _parse_ui_tars(text: str, image_size: tuple[int, int] | None) -> ParsedAction:
    match = _UI_TARS_ACTION.search(text)
    thinking = _UI_TARS_THOUGHT.sub("", text[: match.start()] if match else "").strip() or None
    if match is None:
        return _fallback(text, UI_TARS_SCALE, thinking, "no 'Action: name(...)' line", "ui-tars")
    name = match.group(1).lower()
    kwargs = {
        key: _unescape(single if single else double)
        for key, single, double in _UI_TARS_ARG.findall(match.group(2))
    }
    arguments, problem = _ui_tars_arguments(name, kwargs)
    if arguments is None:
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


# ---------------------------------------------------------------------------------------------
# Writing


def format_tool_call(action: Mapping[str, Any], thinking: str | None = None) -> str:
    """MAI-UI response text for `action` (a dict in our vocabulary), as a policy would write.

    ``parse_response(format_tool_call(a, t))`` gives back `a` and `t`.
    """
    if not isinstance(action.get("action"), str):
        raise ValueError(
            f"action: needs an 'action' name, e.g. {{'action': 'click', 'coordinate': [500, 300]}},"
            f" got {dict(action)!r}"
        )
    if thinking is not None and "</thinking>" in thinking:
        raise ValueError("thinking: must not contain '</thinking>'")
    call = json.dumps({"name": "mobile_use", "arguments": dict(action)}, ensure_ascii=False)
    parts = [f"<thinking>\n{thinking}\n</thinking>"] if thinking else []
    parts.append(f"<tool_call>\n{call}\n</tool_call>")
    return "\n".join(parts)


def history_step(response: str, image: Any = None) -> HistoryStep:
    """A prompt's history step from a raw response, summarised by the action it parses to."""
    parsed = parse_response(response)
    return HistoryStep(response=response, summary=action_summary(parsed.action_type, parsed.action),
                       image=image)


# ---------------------------------------------------------------------------------------------
# Small helpers


def _snake_case(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


# ---------------------------------------------------------------------------------------------
# Built-in formats, in detection order


def _detect_qwen(text: str) -> bool:
    return "<tool_call>" in text and re.search(r'"name"\s*:\s*"computer_use"', text) is not None


def _detect_gui_owl(text: str) -> bool:
    if "<tool_call>" not in text:
        return False
    before, _, body = text.partition("<tool_call>")
    return (
        bool(_ACTION_LINE.search(_outside_thinking(before)))
        or '"coordinate2"' in body
        or '"failure"' in body
    )


def _parse_qwen(text: str, image_size: tuple[int, int] | None) -> ParsedAction:
    scale = CoordinateScale.pixels(*image_size) if image_size else None
    return parse_tool_call_text(text, scale=scale, fmt="qwen-vl")


register_format("qwen-vl", _parse_qwen, detect=_detect_qwen)
register_format(
    "gui-owl",
    lambda text, _size: parse_tool_call_text(text, scale=GUI_OWL_SCALE, fmt="gui-owl"),
    detect=_detect_gui_owl,
)
register_format(
    "mai-ui",
    lambda text, _size: parse_tool_call_text(text, scale=MAI_UI_SCALE, fmt="mai-ui"),
    detect=lambda text: "<tool_call>" in text,
)
register_format("ui-tars", _parse_ui_tars, detect=lambda text: bool(_UI_TARS_DETECT.search(text)))
