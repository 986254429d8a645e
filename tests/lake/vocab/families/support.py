"""Helpers the model-family tests share: a tool-call response and a short history."""

from __future__ import annotations

import json

from episodelake.lake.vocab.chat import HistoryStep
from episodelake.lake.vocab.families import format_tool_call, history_step


def mai(arguments, *, thinking: str | None = "look at the screen", name="mobile_use") -> str:
    call = {"name": name, "arguments": arguments}
    head = f"<thinking>{thinking}</thinking>\n" if thinking else ""
    return f"{head}<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>"


def images_in(messages):
    return [
        part.get("image")
        for message in messages
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image"
    ]


HISTORY = [
    HistoryStep(
        response=format_tool_call({"action": "open", "text": "Clock"}),
        summary="open 'Clock'",
        image="s0",
    ),
    HistoryStep(summary="click (1, 2)", image="s1"),
    history_step(mai({"action": "wait"}), image="s2"),
]
