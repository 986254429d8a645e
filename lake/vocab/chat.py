"""What every prompt layout is built from: a history step, an image part, a text part, and the
action space as the models are told it.

Each model family with a prompt layout (:mod:`episodelake.lake.vocab.families`) builds its
messages out of these; :func:`episodelake.lake.vocab.prompts.build_messages` is the one entry
point that picks the layout. Images are never inlined here: every screenshot becomes the
content part that `image_part` returns for the caller's reference (a path, a step number,
bytes...).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.action_space import action_summary

#: The action space as every layout's system prompt states it.
ACTION_SPACE_TEXT = """\
Coordinates are [x, y] on a 0-999 grid laid over the screenshot: [0, 0] is the top-left
corner and [999, 999] the bottom-right, whatever the screen's real size.

Actions (the "arguments" object of the tool call):
- {"action": "click", "coordinate": [x, y]}: tap once at the point.
- {"action": "long_press", "coordinate": [x, y]}: press and hold at the point.
- {"action": "double_tap", "coordinate": [x, y]}: tap twice quickly at the point.
- {"action": "swipe", "direction": "up" | "down" | "left" | "right", "coordinate": [x, y]}:
  move a finger across the screen in that direction, starting at the point (the coordinate
  may be left out to start from the centre).
- {"action": "drag", "start_coordinate": [x, y], "end_coordinate": [x, y]}: press at the
  start, move to the end, release.
- {"action": "type", "text": "..."}: enter text into the focused field.
- {"action": "open", "text": "app name"}: launch an app by its name.
- {"action": "system_button", "button": "back" | "home" | "menu" | "enter"}: press a
  system key.
- {"action": "wait"}: let the screen settle before the next look.
- {"action": "terminate", "status": "success" | "fail"}: stop; the task is done, or cannot
  be done.
- {"action": "answer", "text": "..."}: reply to the user when the task asks a question."""

ImagePart = Callable[[Any], dict[str, Any]]


@dataclass(frozen=True)
class HistoryStep:
    """A step already taken: what the model said and the screenshot it said it about.

    `summary` is the one-line action (see :func:`~episodelake.lake.vocab.action_space.action_summary`)
    that text histories show; `response` the raw model text, shown as the assistant turn of
    MAI-UI prompts (the summary stands in without it). `from_step` takes the summary from a
    stored row; from a raw response, the parser derives it
    (:func:`episodelake.lake.vocab.families.history_step`), so a response is parsed once, by
    the one parser, not again on every later turn. `image` is the caller's reference to the
    screenshot, passed to `image_part` unchanged.
    """

    response: str | None = None
    summary: str | None = None
    image: Any = None

    @classmethod
    def from_step(cls, row: Mapping[str, Any], image: Any = None) -> HistoryStep:
        """From a steps row (``model_response``, ``action_type``, ``action``)."""
        return cls(
            response=row.get("model_response"),
            summary=action_summary(row.get("action_type"), row.get("action")),
            image=image,
        )

    def line(self) -> str:
        """The step as one line of text."""
        if self.summary is None:
            raise InvalidInput("a history step needs its summary: HistoryStep.from_step derives "
                               "it from a stored row, lake.vocab.families.history_step from a "
                               "response")
        return self.summary


def image_placeholder(ref: Any) -> dict[str, Any]:
    """``{"type": "image", "image": ref}``, or just ``{"type": "image"}`` without a ref."""
    return {"type": "image"} if ref is None else {"type": "image", "image": ref}


def data_url_part(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    """An OpenAI ``image_url`` part carrying the image bytes as a data URL."""
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{encoded}"}}


def text_part(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}
