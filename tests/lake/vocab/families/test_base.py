"""What every family shares: argument validation (each failure names its field), repairs
of broken structure, the fallbacks, and the steps columns an action fills."""

from __future__ import annotations

import json

import pytest

from episodelake.lake.vocab.families import parse_response
from tests.lake.vocab.families.support import mai

# --- validation: each failure names its field ---------------------------------------------

INVALID = [
    ({"action": "click"}, "click", "click: missing 'coordinate'"),
    (
        {"action": "click", "coordinate": [1, 2, 3]},
        "click",
        "click: 'coordinate' must be two numbers [x, y], got [1, 2, 3]",
    ),
    ({"action": "click", "coordinate": [True, 2]}, "click", "must be two numbers"),
    (
        {"action": "long_press", "coordinate": [1200, 300]},
        "long_press",
        "long_press: x=1200 in 'coordinate' is outside [0, 999]",
    ),
    (
        {"action": "double_tap", "coordinate": [10, -1]},
        "double_tap",
        "double_tap: y=-1 in 'coordinate' is outside [0, 999]",
    ),
    ({"action": "drag", "start_coordinate": [1, 2]}, "drag", "drag: missing 'end_coordinate'"),
    ({"action": "swipe"}, "swipe", "swipe: missing 'direction'"),
    (
        {"action": "swipe", "direction": "sideways"},
        "swipe",
        "swipe: 'direction' must be one of up, down, left, right, got 'sideways'",
    ),
    ({"action": "type"}, "type", "type: missing 'text'"),
    ({"action": "type", "text": "  "}, "type", "type: 'text' is empty"),
    ({"action": "open", "text": 7}, "open", "open: 'text' must be a string, got 7"),
    ({"action": "answer"}, "answer", "answer: missing 'text'"),
    (
        {"action": "system_button", "button": "recent"},
        "system_button",
        "system_button: 'button' must be one of back, home, menu, enter, got 'recent'",
    ),
    ({"action": "system_button"}, "system_button", "system_button: missing 'button'"),
    (
        {"action": "terminate", "status": "done"},
        "terminate",
        "terminate: 'status' must be one of success, fail, got 'done'",
    ),
    ({"action": "fly", "coordinate": [1, 2]}, "unparsed", "unknown action 'fly'"),
    ({"coordinate": [1, 2]}, "unparsed", "missing 'action' in the tool call"),
]


@pytest.mark.parametrize(("arguments", "action_type", "error"), INVALID)
def test_invalid_arguments_have_a_specific_error(arguments, action_type, error):
    parsed = parse_response(mai(arguments))
    assert not parsed.valid
    assert parsed.action_type == action_type
    assert error in parsed.error


def test_out_of_range_point_is_clamped_and_kept_as_written():
    parsed = parse_response(mai({"action": "click", "coordinate": [1200, 300]}))
    assert (parsed.x, parsed.y) == pytest.approx((1.0, 300 / 999))
    assert parsed.action["coordinate"] == [1200, 300]


def test_unknown_action_keeps_its_arguments():
    parsed = parse_response(mai({"action": "fly", "coordinate": [1, 2]}))
    assert parsed.action == {"action": "fly", "coordinate": [1, 2]}


# --- broken structure and fallbacks -------------------------------------------------------


def test_broken_json_without_fallback_is_unparsed_with_the_reason():
    parsed = parse_response(
        '<tool_call>{"name": "mobile_use", "arguments": {action: click}</tool_call>'
    )
    assert parsed.action_type == "unparsed"
    assert not parsed.valid
    assert parsed.error.startswith("tool call is not valid JSON")
    assert "no action found" in parsed.error


def test_missing_closing_brace_is_repaired():
    text = '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [5, 6]}</tool_call>'
    parsed = parse_response(text)
    assert parsed.valid and parsed.action == {"action": "click", "coordinate": [5, 6]}


def test_trailing_text_after_the_object_is_ignored():
    text = '<tool_call>{"action": "wait"}}} oops</tool_call>'
    assert parse_response(text).action == {"action": "wait"}


def test_fullwidth_punctuation_is_normalised():
    text = '<tool_call>{"name"："mobile_use"，"arguments"：{"action"："click"，"coordinate"：[5，6]}}</tool_call>'
    parsed = parse_response(text)
    assert parsed.valid
    assert parsed.action == {"action": "click", "coordinate": [5, 6]}


def test_fullwidth_text_inside_valid_json_is_left_alone():
    parsed = parse_response(mai({"action": "type", "text": "你好，世界（测试）"}))
    assert parsed.action["text"] == "你好，世界（测试）"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I will click(100, 200) now", {"action": "click", "coordinate": [100, 200]}),
        ("click at 100, 200", {"action": "click", "coordinate": [100, 200]}),
        ("Tap on (7, 8).", {"action": "click", "coordinate": [7, 8]}),
        ("long press at 3, 4", {"action": "long_press", "coordinate": [3, 4]}),
        ("double_tap（10，20）", {"action": "double_tap", "coordinate": [10, 20]}),
        ("click(1, 2) ... yes, click at 1, 2", {"action": "click", "coordinate": [1, 2]}),
        (
            '<tool_call>{"action": "click", click(4, 5)</tool_call>',
            {"action": "click", "coordinate": [4, 5]},
        ),
    ],
)
def test_unambiguous_fallbacks(text, expected):
    parsed = parse_response(text)
    assert parsed.valid, parsed.error
    assert parsed.fmt == "fallback"
    assert parsed.action == expected


@pytest.mark.parametrize(
    "text",
    [
        "click(100, 200) or click(300, 400)",
        "click at 1, 2 then long press at 1, 2",
        '<tool_call>{"action": click(1, 2), click(3, 4)</tool_call>',
    ],
)
def test_ambiguous_fallbacks_are_rejected(text):
    parsed = parse_response(text)
    assert parsed.action_type == "unparsed"
    assert "several actions" in parsed.error
    assert parsed.action == {}


def test_fallback_ignores_the_thinking():
    parsed = parse_response("<thinking>maybe click(1, 2)?</thinking> no idea")
    assert parsed.action_type == "unparsed"
    assert parsed.thinking == "maybe click(1, 2)?"
    assert parsed.error == "no <tool_call> block, and no action found in the text"


@pytest.mark.parametrize("text", ["", "   \n", "hello there"])
def test_unparsed_keeps_an_error(text):
    parsed = parse_response(text)
    assert parsed.action_type == "unparsed"
    assert not parsed.valid
    assert parsed.error
    assert parsed.x is None and parsed.y is None


def test_non_text_is_a_type_error():
    with pytest.raises(TypeError, match="text: expected str"):
        parse_response(None)  # type: ignore[arg-type]


def test_unknown_format_name_is_a_value_error():
    with pytest.raises(ValueError, match="unknown action format 'nope'"):
        parse_response("x", fmt="nope")


def test_bad_image_size_is_a_value_error():
    with pytest.raises(ValueError, match="image_size"):
        parse_response("x", image_size=(0, 10))


def test_to_row_fills_the_steps_columns():
    from episodelake.lake.storage.schema import STEPS

    row = parse_response(
        mai({"action": "drag", "start_coordinate": [1, 2], "end_coordinate": [3, 4]})
    ).to_row()
    assert set(row) <= set(STEPS.names)
    assert json.loads(row["action"])["start_coordinate"] == [1, 2]
    assert row["action_valid"] is True and row["action_error"] is None
    bad = parse_response("nothing").to_row()
    assert (bad["action_type"], bad["action_valid"], bad["action"]) == ("unparsed", False, "{}")
