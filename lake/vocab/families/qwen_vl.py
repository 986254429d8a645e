"""Qwen-VL: a ``mobile_use`` / ``computer_use`` tool call with coordinates in absolute pixels
of the image the model saw.

Pass ``image_size=(width, height)``; without it a coordinate cannot be placed and the action
is invalid. ``left_click``, ``double_click``, ``key`` with a system key, and
Back/Home/Menu/Enter buttons map onto our actions. A ``mobile_use`` call looks exactly like
MAI-UI's, so auto-detection only picks this family for ``computer_use``; collectors that run
a Qwen-VL model pass ``fmt="qwen-vl"``. No prompt layout of its own.
"""

from __future__ import annotations

import re

from episodelake.lake.vocab.families.base import (
    CoordinateScale,
    ModelFamily,
    ParsedAction,
    parse_tool_call_text,
)


def detect(text: str) -> bool:
    return "<tool_call>" in text and re.search(r'"name"\s*:\s*"computer_use"', text) is not None


def parse(text: str, image_size: tuple[int, int] | None) -> ParsedAction:
    scale = CoordinateScale.pixels(*image_size) if image_size else None
    return parse_tool_call_text(text, scale=scale, fmt="qwen-vl")


FAMILY = ModelFamily(
    name="qwen-vl",
    summary="Qwen-VL's `mobile_use` / `computer_use` tool calls, absolute pixels",
    doc=__doc__,
    parse=parse,
    detect=detect,
    # pixels need an image size, which `parse_response` passes; the example names none, so
    # it is a call without a point
    example='<tool_call>\n{"name": "computer_use", "arguments": {"action": "key", '
            '"text": "Enter"}}\n</tool_call>',
)
