"""GUI-Owl: an ``Action: <description>`` line, then MAI-UI's tool call; its prompt calls the
screen 1000x1000 while the environment divides by 999, so 1000 is accepted (and clamped)."""

from __future__ import annotations

import re

from episodelake.collectors.record.actions.common import (
    CoordinateScale,
    ParsedAction,
    outside_thinking,
    parse_tool_call_text,
)
from episodelake.lake.vocab.action_space import GRID

GUI_OWL_SCALE = CoordinateScale(GRID, GRID, 1000, 1000)
_ACTION_LINE = re.compile(r"^\s*Action\s*:", re.MULTILINE)


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
