"""Chat messages for phone agents: the goal, the history, the screenshots, in one place.

Agents build their prompts here and recorders store the result in ``steps.prompt``, so the
exact input behind every response can be rebuilt (the reference framework keeps neither its
system prompt nor its history window); the SFT exports rebuild the same messages from stored
steps. It lives in the lake because both reach it: the lake depends on nothing above it.

Each layout belongs to its model family (:mod:`episodelake.lake.vocab.families`: ``mai-ui``
multi-turn, ``gui-owl`` single-turn; each family module's docstring describes its layout);
this module checks the arguments and picks the layout. The pieces layouts share (history
steps, image and text parts, the action space text) are in :mod:`episodelake.lake.vocab.chat`.

Images are never inlined here: every screenshot becomes the content part that `image_part`
returns for the caller's reference (a path, a step number, bytes...). The default writes
``{"type": "image", "image": ref}`` (the form Hugging Face chat templates read; TRL-style
placeholders are ``image_part=lambda ref: {"type": "image"}``); :func:`data_url_part` gives
OpenAI-style data URLs. Parts appear in message order: the history screenshots oldest first,
then the current one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.chat import (
    HistoryStep,
    ImagePart,
    data_url_part,
    image_placeholder,
)
from episodelake.lake.vocab.families import FAMILIES, prompt_styles

#: The prompt styles as a type the API's request models can name (an enum in the OpenAPI
#: document); tests/lake/vocab/test_prompts.py checks it equals the families with a layout.
Style = Literal["mai-ui", "gui-owl"]
STYLES: tuple[Style, ...] = get_args(Style)


def build_messages(
    goal: str,
    history: Sequence[HistoryStep],
    *,
    screenshot: Any = None,
    style: str = "mai-ui",
    history_length: int = 3,
    image_part: ImagePart = image_placeholder,
) -> list[dict[str, Any]]:
    """OpenAI-style chat messages asking for the next action on `screenshot`.

    `history` is the episode's previous steps, oldest first; the screenshots of the last
    `history_length` of them are shown, the rest appear as text. `style` names a model family
    with a prompt layout.
    """
    family = FAMILIES.get(style)
    if family is None or family.layout is None:
        raise InvalidInput(f"style: unknown prompt style {style!r}; expected one of "
                           f"{tuple(prompt_styles())}")
    if history_length < 0:
        raise InvalidInput(f"history_length: must be >= 0, got {history_length}")
    if not isinstance(goal, str) or not goal.strip():
        raise InvalidInput("goal: the task goal must be non-empty text")
    for index, step in enumerate(history):
        if step.summary is None:
            raise InvalidInput(f"history[{index}]: needs a summary (the one-line action); "
                               "HistoryStep.from_step derives it from a stored row, "
                               "lake.vocab.families.history_step from a response")
    split = max(0, len(history) - history_length)
    return family.layout(goal, history, split, screenshot, image_part)


__all__ = ["STYLES", "HistoryStep", "ImagePart", "Style", "build_messages", "data_url_part",
           "image_placeholder"]
