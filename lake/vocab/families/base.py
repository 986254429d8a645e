"""What every model family shares: the :class:`ModelFamily` a family module defines, the
action record a parser returns, argument validation onto the stored vocabulary, the
``<tool_call>`` reader (MAI-UI, GUI-Owl and Qwen-VL all write one), and the fallbacks for
broken structure. The registry is the package (:mod:`episodelake.lake.vocab.families`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.action_space import (
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
from episodelake.lake.vocab.chat import HistoryStep, ImagePart

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

    def point(self) -> tuple[float, float]:
        """The normalised (x, y) of an action that has one (a click, a drag's start)."""
        if self.x is None or self.y is None:
            raise InvalidInput(f"{self.action_type}: the action has no point")
        return self.x, self.y

    def end_point(self) -> tuple[float, float]:
        """The normalised (x2, y2) of an action that has an end (a drag)."""
        if self.x2 is None or self.y2 is None:
            raise InvalidInput(f"{self.action_type}: the action has no end point")
        return self.x2, self.y2

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


#: ``parser(text, image_size) -> ParsedAction``.
FormatParser = Callable[[str, tuple[int, int] | None], ParsedAction]

#: ``layout(goal, history, split, screenshot, image_part) -> messages``: the whole chat (system
#: prompt first) asking for the next action; the screenshots of ``history[split:]`` are shown,
#: the earlier steps as text. :func:`episodelake.lake.vocab.prompts.build_messages` checks the
#: arguments and computes `split`.
PromptLayout = Callable[[str, Sequence[HistoryStep], int, Any, ImagePart], list[dict[str, Any]]]


@dataclass(frozen=True, kw_only=True)
class ModelFamily:
    """One model family: how its responses read as actions and, when it has one, the prompt
    layout its models are shown. A family module defines ``FAMILY = ModelFamily(...)``.

    `detect(text)` says whether ``fmt="auto"`` should read a response as this family (None:
    only when asked for by name). `example` is a response of this family with a valid action,
    which the registry's test parses. `doc` is the module's docstring, its full description."""

    name: str
    summary: str
    doc: str | None
    parse: FormatParser
    example: str
    detect: Callable[[str], bool] | None = None
    layout: PromptLayout | None = None


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
_CODE_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def parse_tool_call_text(text: str, *, scale: CoordinateScale | None, fmt: str) -> ParsedAction:
    """Read the first ``<tool_call>`` of `text` (or fall back) and validate it on `scale`."""
    thinking = _thinking(text)
    match = _TOOL_CALL.search(text)
    if match is None:
        return fallback(outside_thinking(text), scale, thinking, "no <tool_call> block", fmt)
    body = _CODE_FENCE.sub("", match.group(1).strip())
    call, problem = _load_json_object(body)
    if call is None:
        return fallback(body, scale, thinking, f"tool call is not valid JSON ({problem})", fmt)
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


def outside_thinking(text: str) -> str:
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


def fallback(
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
# Small helpers


def _snake_case(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))
