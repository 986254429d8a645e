"""Qwen-VL: a ``mobile_use`` / ``computer_use`` tool call with coordinates in pixels of the
image the model saw (``image_size`` places them)."""

from __future__ import annotations

import re

from episodelake.collectors.record.actions.common import (
    CoordinateScale,
    ParsedAction,
    parse_tool_call_text,
)


def detect(text: str) -> bool:
    return "<tool_call>" in text and re.search(r'"name"\s*:\s*"computer_use"', text) is not None


def parse(text: str, image_size: tuple[int, int] | None) -> ParsedAction:
    scale = CoordinateScale.pixels(*image_size) if image_size else None
    return parse_tool_call_text(text, scale=scale, fmt="qwen-vl")

