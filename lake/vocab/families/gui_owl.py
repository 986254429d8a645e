"""GUI-Owl: an ``Action: <description>`` line, then MAI-UI's ``mobile_use`` tool call.

Responses: its prompt calls the screen 1000x1000 while the environment divides by 999, so
1000 is accepted (and clamped). ``swipe`` with ``coordinate`` and ``coordinate2`` is a drag;
``terminate`` status ``failure`` is ``fail``. Detected by the ``Action:`` line (outside the
thinking) or those arguments.

Prompt layout: single-turn. One user message: the task, every previous action as a numbered
line, the screenshots of the steps in the window each labelled with its step, then the
current screenshot.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from episodelake.lake.vocab.action_space import GRID
from episodelake.lake.vocab.chat import ACTION_SPACE_TEXT, HistoryStep, ImagePart, text_part
from episodelake.lake.vocab.families.base import (
    CoordinateScale,
    ModelFamily,
    ParsedAction,
    outside_thinking,
    parse_tool_call_text,
)

GUI_OWL_SCALE = CoordinateScale(GRID, GRID, 1000, 1000)
_ACTION_LINE = re.compile(r"^\s*Action\s*:", re.MULTILINE)

SYSTEM_PROMPT = f"""\
You are an agent that operates an Android phone for the user. You are given the task, the
actions taken so far, recent screenshots and the current screenshot.

Choose the single next action. First write one line starting with "Action:" that says in
plain words what you are about to do, then the call itself:
Action: Open the settings app.
<tool_call>
{{"name": "mobile_use", "arguments": {{"action": "open", "text": "Settings"}}}}
</tool_call>

{ACTION_SPACE_TEXT}
"""


def detect(text: str) -> bool:
    if "<tool_call>" not in text:
        return False
    before, _, body = text.partition("<tool_call>")
    return (
        bool(_ACTION_LINE.search(outside_thinking(before)))
        or '"coordinate2"' in body
        or '"failure"' in body
    )


def parse(text: str, image_size: tuple[int, int] | None) -> ParsedAction:
    return parse_tool_call_text(text, scale=GUI_OWL_SCALE, fmt="gui-owl")


def layout(goal: str, history: Sequence[HistoryStep], split: int, screenshot: Any,
           image_part: ImagePart) -> list[dict[str, Any]]:
    lines = [f"Task: {goal}", ""]
    if history:
        lines.append("Previous actions:")
        lines += [f"Step {i}: {step.line()}" for i, step in enumerate(history, 1)]
    else:
        lines.append("No actions taken yet.")
    content: list[dict[str, Any]] = [text_part("\n".join(lines))]
    for number, step in enumerate(history[split:], split + 1):
        content += [text_part(f"Screenshot before step {number}:"), image_part(step.image)]
    content += [text_part("Current screenshot:"), image_part(screenshot)]
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}]


FAMILY = ModelFamily(
    name="gui-owl",
    summary="an `Action:` line, then the tool call (1000-wide grid)",
    doc=__doc__,
    parse=parse,
    detect=detect,
    layout=layout,
    example='Action: Open the clock.\n<tool_call>\n{"name": "mobile_use", "arguments": '
            '{"action": "open", "text": "Clock"}}\n</tool_call>',
)
