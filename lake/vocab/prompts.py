"""Chat messages for phone agents: the goal, the history, the screenshots, in one place.

Agents build their prompts here and recorders store the result in ``steps.prompt``, so the
exact input behind every response can be rebuilt (the reference framework keeps neither its
system prompt nor its history window); the SFT exports rebuild the same messages from stored
steps. It lives in the lake because both reach it: the lake depends on nothing above it.
Two layouts:

``mai-ui``
    Multi-turn. The first user turn states the task (and lists, as text, the actions taken
    before the screenshot window); each of the last `history_length` steps is a user turn with
    its screenshot followed by an assistant turn with that step's response; the last user turn
    holds the current screenshot. The model answers with ``<thinking>`` and a ``<tool_call>``.
``gui-owl``
    Single-turn. One user message: the task, every previous action as a numbered line, the
    last `history_length` screenshots each labelled with its step, then the current
    screenshot. The model answers with an ``Action:`` line and a ``<tool_call>``.

Images are never inlined here: every screenshot becomes the content part that `image_part`
returns for the caller's reference (a path, a step number, bytes...). The default writes
``{"type": "image", "image": ref}`` (the form Hugging Face chat templates read; TRL-style
placeholders are ``image_part=lambda ref: {"type": "image"}``); :func:`data_url_part` gives
OpenAI-style data URLs. Parts appear in message order: the history screenshots oldest first,
then the current one.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from episodelake.lake.vocab.action_space import action_summary

Style = Literal["mai-ui", "gui-owl"]
STYLES: tuple[Style, ...] = get_args(Style)

_ACTION_SPACE = """\
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

MAI_UI_SYSTEM_PROMPT = f"""\
You control an Android phone to carry out the user's task. Each turn you are shown the current
screenshot; earlier turns show the screens you saw and the actions you chose.

Think about what the screen shows and what the next single step should be, then act. Reply
with your reasoning inside <thinking></thinking>, followed by exactly one action:
<tool_call>
{{"name": "mobile_use", "arguments": {{"action": "click", "coordinate": [500, 300]}}}}
</tool_call>

{_ACTION_SPACE}
"""

GUI_OWL_SYSTEM_PROMPT = f"""\
You are an agent that operates an Android phone for the user. You are given the task, the
actions taken so far, recent screenshots and the current screenshot.

Choose the single next action. First write one line starting with "Action:" that says in
plain words what you are about to do, then the call itself:
Action: Open the settings app.
<tool_call>
{{"name": "mobile_use", "arguments": {{"action": "open", "text": "Settings"}}}}
</tool_call>

{_ACTION_SPACE}
"""

_SYSTEM_PROMPTS = {"mai-ui": MAI_UI_SYSTEM_PROMPT, "gui-owl": GUI_OWL_SYSTEM_PROMPT}

ImagePart = Callable[[Any], dict[str, Any]]


@dataclass(frozen=True)
class HistoryStep:
    """A step already taken: what the model said and the screenshot it said it about.

    `summary` is the one-line action (see :func:`~episodelake.lake.vocab.action_space.action_summary`)
    that text histories show; `response` the raw model text, shown as the assistant turn of
    MAI-UI prompts (the summary stands in without it). `from_step` takes the summary from a
    stored row; from a raw response, the parser derives it
    (:func:`episodelake.collectors.record.actions.history_step`), so a response is parsed
    once, by the one parser, not again on every later turn. `image` is the caller's reference
    to the screenshot, passed to `image_part` unchanged.
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
            raise ValueError("a history step needs its summary: HistoryStep.from_step derives "
                             "it from a stored row, collectors.record.actions.history_step "
                             "from a response")
        return self.summary


def image_placeholder(ref: Any) -> dict[str, Any]:
    """``{"type": "image", "image": ref}``, or just ``{"type": "image"}`` without a ref."""
    return {"type": "image"} if ref is None else {"type": "image", "image": ref}


def data_url_part(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    """An OpenAI ``image_url`` part carrying the image bytes as a data URL."""
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{encoded}"}}


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
    `history_length` of them are shown, the rest appear as text.
    """
    if style not in _SYSTEM_PROMPTS:
        raise ValueError(f"style: unknown prompt style {style!r}; expected one of {STYLES}")
    if history_length < 0:
        raise ValueError(f"history_length: must be >= 0, got {history_length}")
    if not isinstance(goal, str) or not goal.strip():
        raise ValueError("goal: the task goal must be non-empty text")
    for index, step in enumerate(history):
        if step.summary is None:
            raise ValueError(f"history[{index}]: needs a summary (the one-line action); "
                             "HistoryStep.from_step derives it from a stored row, "
                             "collectors.record.actions.history_step from a response")
    split = max(0, len(history) - history_length)
    system = {"role": "system", "content": _SYSTEM_PROMPTS[style]}
    if style == "mai-ui":
        return [system, *_mai_ui_turns(goal, history, split, screenshot, image_part)]
    return [system, _gui_owl_turn(goal, history, split, screenshot, image_part)]


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _mai_ui_turns(
    goal: str, history: Sequence[HistoryStep], split: int, screenshot: Any, image_part: ImagePart
) -> list[dict[str, Any]]:
    intro = f"Task: {goal}"
    if split:
        earlier = "\n".join(f"{i}. {step.line()}" for i, step in enumerate(history[:split], 1))
        intro += f"\n\nActions taken before the screenshots below:\n{earlier}"
    turns: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = [_text(intro)]
    for step in history[split:]:
        turns.append({"role": "user", "content": [*pending, image_part(step.image)]})
        turns.append({"role": "assistant", "content": step.response or step.line()})
        pending = []
    turns.append({"role": "user", "content": [*pending, image_part(screenshot)]})
    return turns


def _gui_owl_turn(
    goal: str, history: Sequence[HistoryStep], split: int, screenshot: Any, image_part: ImagePart
) -> dict[str, Any]:
    lines = [f"Task: {goal}", ""]
    if history:
        lines.append("Previous actions:")
        lines += [f"Step {i}: {step.line()}" for i, step in enumerate(history, 1)]
    else:
        lines.append("No actions taken yet.")
    content: list[dict[str, Any]] = [_text("\n".join(lines))]
    for number, step in enumerate(history[split:], split + 1):
        content += [_text(f"Screenshot before step {number}:"), image_part(step.image)]
    content += [_text("Current screenshot:"), image_part(screenshot)]
    return {"role": "user", "content": content}
