"""MAI-UI: every action type, the tool call read every way it is written, the text
format_tool_call writes, and the multi-turn prompt layout."""

from __future__ import annotations

import json

import pytest

from episodelake.lake.vocab.action_space import ACTION_TYPES
from episodelake.lake.vocab.families import format_tool_call, parse_response
from episodelake.lake.vocab.families.mai_ui import SYSTEM_PROMPT
from episodelake.lake.vocab.prompts import build_messages
from tests.lake.vocab.families.support import HISTORY, images_in, mai

# --- every action type ------------------------------------------------------------

VALID_MAI_UI = [
    ({"action": "click", "coordinate": [500, 300]}, (500 / 999, 300 / 999, None, None)),
    ({"action": "long_press", "coordinate": [0, 999]}, (0.0, 1.0, None, None)),
    ({"action": "double_tap", "coordinate": [999, 0]}, (1.0, 0.0, None, None)),
    ({"action": "swipe", "direction": "up"}, (None, None, None, None)),
    (
        {"action": "swipe", "direction": "left", "coordinate": [100, 200]},
        (100 / 999, 200 / 999, None, None),
    ),
    (
        {"action": "drag", "start_coordinate": [10, 20], "end_coordinate": [30, 40]},
        (10 / 999, 20 / 999, 30 / 999, 40 / 999),
    ),
    ({"action": "type", "text": "hello 世界"}, (None, None, None, None)),
    ({"action": "open", "text": "Settings"}, (None, None, None, None)),
    ({"action": "system_button", "button": "back"}, (None, None, None, None)),
    ({"action": "system_button", "button": "enter"}, (None, None, None, None)),
    ({"action": "wait"}, (None, None, None, None)),
    ({"action": "terminate", "status": "success"}, (None, None, None, None)),
    ({"action": "terminate", "status": "fail"}, (None, None, None, None)),
    ({"action": "answer", "text": "42"}, (None, None, None, None)),
]


@pytest.mark.parametrize(("arguments", "points"), VALID_MAI_UI)
def test_mai_ui_every_action_type(arguments, points):
    parsed = parse_response(mai(arguments))
    assert parsed.valid, parsed.error
    assert parsed.error is None
    assert parsed.fmt == "mai-ui"
    assert parsed.action_type == arguments["action"]
    assert parsed.action == arguments
    assert parsed.thinking == "look at the screen"
    assert (parsed.x, parsed.y, parsed.x2, parsed.y2) == pytest.approx(points)


def test_every_action_type_is_covered_by_the_tests():
    assert {a["action"] for a, _ in VALID_MAI_UI} == set(ACTION_TYPES)


def test_camel_case_drag_keys_are_read_as_snake_case():
    parsed = parse_response(
        mai({"action": "drag", "startCoordinate": [1, 2], "endCoordinate": [3, 4]})
    )
    assert parsed.valid
    assert parsed.action == {"action": "drag", "start_coordinate": [1, 2], "end_coordinate": [3, 4]}


def test_arguments_as_a_json_string():
    text = mai(json.dumps({"action": "click", "coordinate": [1, 2]}))
    assert parse_response(text).action == {"action": "click", "coordinate": [1, 2]}


def test_arguments_absent_action_at_the_top_level():
    text = '<tool_call>{"action": "type", "text": "abc"}</tool_call>'
    assert parse_response(text).action == {"action": "type", "text": "abc"}


def test_arguments_string_that_is_not_json_is_unparsed():
    parsed = parse_response(mai("click somewhere"))
    assert parsed.action_type == "unparsed"
    assert "'arguments' is a string that is not JSON" in parsed.error


def test_arguments_of_the_wrong_type_is_unparsed():
    parsed = parse_response(mai([1, 2]))
    assert parsed.action_type == "unparsed"
    assert "'arguments' must be an object, got list" in parsed.error


def test_coordinate_as_a_string_and_case_of_words():
    parsed = parse_response(mai({"action": "swipe", "direction": "Down", "coordinate": "(5, 6)"}))
    assert parsed.valid
    assert parsed.action == {"action": "swipe", "direction": "down", "coordinate": [5, 6]}


def test_only_the_first_tool_call_counts():
    text = mai({"action": "wait"}) + mai({"action": "click", "coordinate": [1, 1]}, thinking=None)
    assert parse_response(text).action_type == "wait"


def test_think_tag_and_code_fence():
    text = '<think>hm</think><tool_call>```json\n{"action": "wait"}\n```</tool_call>'
    parsed = parse_response(text)
    assert (parsed.thinking, parsed.action_type, parsed.valid) == ("hm", "wait", True)



# --- writing ------------------------------------------------------------------------------


@pytest.mark.parametrize(("arguments", "_points"), VALID_MAI_UI)
def test_format_tool_call_round_trips(arguments, _points):
    parsed = parse_response(format_tool_call(arguments, "reason"))
    assert (parsed.action, parsed.thinking, parsed.valid) == (arguments, "reason", True)


def test_format_tool_call_without_thinking_and_with_bad_input():
    assert format_tool_call({"action": "wait"}).startswith("<tool_call>")
    with pytest.raises(ValueError, match="needs an 'action' name"):
        format_tool_call({"coordinate": [1, 2]})
    with pytest.raises(ValueError, match="thinking"):
        format_tool_call({"action": "wait"}, "a </thinking> b")


# --- prompt layout ------------------------------------------------------------------------


def test_system_prompt_describes_every_action_type():
    for name in ACTION_TYPES:
        assert f'"action": "{name}"' in SYSTEM_PROMPT


def test_mai_ui_messages_window_and_order():
    messages = build_messages("Set an alarm", HISTORY, screenshot="now", history_length=2)
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    intro = messages[1]["content"][0]["text"]
    assert intro.startswith("Task: Set an alarm") and "1. open 'Clock'" in intro
    assert images_in(messages) == ["s1", "s2", "now"]
    assert messages[2]["content"] == "click (1, 2)"
    assert messages[4]["content"] == HISTORY[2].response


def test_mai_ui_messages_without_history():
    messages = build_messages("Go home", [], screenshot=b"png")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"][0] == {"type": "text", "text": "Task: Go home"}
    assert images_in(messages) == [b"png"]
