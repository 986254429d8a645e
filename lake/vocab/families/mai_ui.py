"""MAI-UI: ``<thinking>...</thinking>`` then ``<tool_call>{"name": "mobile_use", "arguments":
{...}}</tool_call>``, the default family.

Responses: ``arguments`` may be an object, a JSON string, or absent (the action at the top
level). Coordinates on the 0-999 grid. camelCase keys (``startCoordinate``) are read as
snake_case. It is what :func:`format_tool_call` writes (the demo and random agents, the tiny
policy), and what ``fmt="auto"`` falls back to.

Prompt layout: multi-turn. The first user turn states the task (and lists, as text, the
actions taken before the screenshot window); each step in the window is a user turn with its
screenshot followed by an assistant turn with that step's response; the last user turn holds
the current screenshot.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.action_space import GRID
from episodelake.lake.vocab.chat import ACTION_SPACE_TEXT, HistoryStep, ImagePart, text_part
from episodelake.lake.vocab.families.base import (
    CoordinateScale,
    ModelFamily,
    ParsedAction,
    parse_tool_call_text,
)

MAI_UI_SCALE = CoordinateScale(GRID, GRID, GRID, GRID)

SYSTEM_PROMPT = f"""\
You control an Android phone to carry out the user's task. Each turn you are shown the current
screenshot; earlier turns show the screens you saw and the actions you chose.

Think about what the screen shows and what the next single step should be, then act. Reply
with your reasoning inside <thinking></thinking>, followed by exactly one action:
<tool_call>
{{"name": "mobile_use", "arguments": {{"action": "click", "coordinate": [500, 300]}}}}
</tool_call>

{ACTION_SPACE_TEXT}
"""


def format_tool_call(action: Mapping[str, Any], thinking: str | None = None) -> str:
    """MAI-UI response text for `action` (a dict in our vocabulary), as a policy would write.

    ``parse_response(format_tool_call(a, t))`` gives back `a` and `t`.
    """
    if not isinstance(action.get("action"), str):
        raise InvalidInput(
            f"action: needs an 'action' name, e.g. {{'action': 'click', 'coordinate': [500, 300]}},"
            f" got {dict(action)!r}"
        )
    if thinking is not None and "</thinking>" in thinking:
        raise InvalidInput("thinking: must not contain '</thinking>'")
    call = json.dumps({"name": "mobile_use", "arguments": dict(action)}, ensure_ascii=False)
    parts = [f"<thinking>\n{thinking}\n</thinking>"] if thinking else []
    parts.append(f"<tool_call>\n{call}\n</tool_call>")
    return "\n".join(parts)


def parse(text: str, image_size: tuple[int, int] | None) -> ParsedAction:
    return parse_tool_call_text(text, scale=MAI_UI_SCALE, fmt="mai-ui")


def detect(text: str) -> bool:
    return "<tool_call>" in text


def layout(goal: str, history: Sequence[HistoryStep], split: int, screenshot: Any,
           image_part: ImagePart) -> list[dict[str, Any]]:
    intro = f"Task: {goal}"
    if split:
        earlier = "\n".join(f"{i}. {step.line()}" for i, step in enumerate(history[:split], 1))
        intro += f"\n\nActions taken before the screenshots below:\n{earlier}"
    turns: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    pending: list[dict[str, Any]] = [text_part(intro)]
    for step in history[split:]:
        turns.append({"role": "user", "content": [*pending, image_part(step.image)]})
        turns.append({"role": "assistant", "content": step.response or step.line()})
        pending = []
    turns.append({"role": "user", "content": [*pending, image_part(screenshot)]})
    return turns


FAMILY = ModelFamily(
    name="mai-ui",
    summary="<thinking> then a mobile_use tool call on the 0-999 grid (the default)",
    doc=__doc__,
    parse=parse,
    detect=detect,
    layout=layout,
    example=format_tool_call({"action": "click", "coordinate": [500, 300]}, "tap the button"),
)
