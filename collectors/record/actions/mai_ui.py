"""MAI-UI: ``<thinking>...</thinking>`` then a ``mobile_use`` ``<tool_call>`` on the 0-999 grid.
The default format, and the one :func:`format_tool_call` writes (the demo and random agents,
the tiny policy)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from episodelake.collectors.record.actions.common import (
    CoordinateScale,
    ParsedAction,
    parse_tool_call_text,
)
from episodelake.lake.vocab.action_space import GRID

MAI_UI_SCALE = CoordinateScale(GRID, GRID, GRID, GRID)


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


def parse(text: str, image_size: tuple[int, int] | None) -> ParsedAction:
    return parse_tool_call_text(text, scale=MAI_UI_SCALE, fmt="mai-ui")


def detect(text: str) -> bool:
    return "<tool_call>" in text
