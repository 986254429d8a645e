"""Action parsing: every format, every action type, and every way a response can be broken."""

from __future__ import annotations

import json
import re

import pytest

from episodelake.collectors.record import actions
from episodelake.collectors.record.actions import (
    ParsedAction,
    format_tool_call,
    history_step,
    parse_response,
    register_format,
)
from episodelake.lake.vocab.action_space import ACTION_TYPES, action_summary
from episodelake.lake.vocab.prompts import (
    GUI_OWL_SYSTEM_PROMPT,
    MAI_UI_SYSTEM_PROMPT,
    HistoryStep,
    build_messages,
    data_url_part,
)


def mai(arguments, *, thinking: str | None = "look at the screen", name="mobile_use") -> str:
    call = {"name": name, "arguments": arguments}
    head = f"<thinking>{thinking}</thinking>\n" if thinking else ""
    return f"{head}<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>"


# --- MAI-UI: every action type ------------------------------------------------------------

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


# --- GUI-Owl ------------------------------------------------------------------------------


def test_gui_owl_swipe_with_two_points_is_a_drag():
    text = "Action: Scroll the list.\n" + mai(
        {"action": "swipe", "coordinate": [100, 900], "coordinate2": [100, 1000]}, thinking=None
    )
    parsed = parse_response(text)
    assert parsed.fmt == "gui-owl"
    assert parsed.action == {
        "action": "drag",
        "start_coordinate": [100, 900],
        "end_coordinate": [100, 999],
    }
    assert parsed.valid
    assert (parsed.x2, parsed.y2) == pytest.approx((100 / 999, 1.0))
    assert parsed.thinking == "Action: Scroll the list."


def test_an_action_line_inside_the_thinking_is_not_gui_owl():
    text = mai({"action": "wait"}, thinking="Plan:\nAction: wait a little")
    assert parse_response(text).fmt == "mai-ui"


def test_gui_owl_terminate_failure_is_fail():
    text = "Action: Give up.\n" + mai({"action": "terminate", "status": "failure"}, thinking=None)
    parsed = parse_response(text)
    assert parsed.action == {"action": "terminate", "status": "fail"} and parsed.valid


def test_gui_owl_accepts_1000_but_not_more():
    ok = parse_response(mai({"action": "click", "coordinate": [1000, 5]}), fmt="gui-owl")
    assert ok.valid and ok.x == 1.0 and ok.action["coordinate"] == [999, 5]
    bad = parse_response(mai({"action": "click", "coordinate": [1001, 5]}), fmt="gui-owl")
    assert bad.error == "click: x=1001 in 'coordinate' is outside [0, 1000]"


# --- Qwen-VL ------------------------------------------------------------------------------


def test_qwen_pixels_need_the_image_size():
    text = mai({"action": "left_click", "coordinate": [540, 1200]}, name="computer_use")
    parsed = parse_response(text)
    assert parsed.fmt == "qwen-vl"
    assert parsed.action_type == "click" and not parsed.valid
    assert "pass image_size=(width, height)" in parsed.error
    sized = parse_response(text, image_size=(1080, 2400))
    assert sized.valid
    assert (sized.x, sized.y) == pytest.approx((0.5, 0.5))
    assert sized.action == {"action": "click", "coordinate": [500, 500]}


def test_qwen_mobile_use_is_chosen_by_name():
    text = mai({"action": "swipe", "coordinate": [0, 0], "coordinate2": [1080, 2400]})
    parsed = parse_response(text, fmt="qwen-vl", image_size=(1080, 2400))
    assert parsed.action == {
        "action": "drag",
        "start_coordinate": [0, 0],
        "end_coordinate": [999, 999],
    }
    assert (parsed.x2, parsed.y2) == (1.0, 1.0)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"action": "double_click", "coordinate": [10, 10]},
            {"action": "double_tap", "coordinate": [10, 10]},
        ),
        ({"action": "key", "text": "Enter"}, {"action": "system_button", "button": "enter"}),
        (
            {"action": "key", "keys": ["KEYCODE_BACK"]},
            {"action": "system_button", "button": "back"},
        ),
        (
            {"action": "system_button", "button": "Home"},
            {"action": "system_button", "button": "home"},
        ),
        ({"action": "open", "text": "Maps"}, {"action": "open", "text": "Maps"}),
        ({"action": "wait", "time": 2}, {"action": "wait"}),
        ({"action": "type", "text": "x"}, {"action": "type", "text": "x"}),
    ],
)
def test_qwen_vocabulary(arguments, expected):
    parsed = parse_response(mai(arguments), fmt="qwen-vl", image_size=(999, 999))
    assert parsed.valid, parsed.error
    assert parsed.action == expected


def test_qwen_pixel_out_of_the_image():
    parsed = parse_response(
        mai({"action": "click", "coordinate": [1100, 5]}), fmt="qwen-vl", image_size=(1080, 2400)
    )
    assert parsed.error == "click: x=1100 in 'coordinate' is outside [0, 1080]"


def test_qwen_unsupported_desktop_action():
    parsed = parse_response(
        mai({"action": "right_click", "coordinate": [1, 1]}, name="computer_use")
    )
    assert parsed.action_type == "unparsed"
    assert "unknown action 'right_click'" in parsed.error


def test_bad_image_size_is_a_value_error():
    with pytest.raises(ValueError, match="image_size"):
        parse_response("x", image_size=(0, 10))


# --- UI-TARS ------------------------------------------------------------------------------

UI_TARS = [
    ("click(start_box='(500,300)')", {"action": "click", "coordinate": [500, 300]}, (0.5, 0.3)),
    (
        "click(start_box='<|box_start|>(500,300)<|box_end|>')",
        {"action": "click", "coordinate": [500, 300]},
        (0.5, 0.3),
    ),
    (
        "click(point='<point>250 750</point>')",
        {"action": "click", "coordinate": [250, 749]},
        (0.25, 0.75),
    ),
    (
        "click(start_box='[100,100,300,300]')",
        {"action": "click", "coordinate": [200, 200]},
        (0.2, 0.2),
    ),
    (
        "left_double(start_box='(10,10)')",
        {"action": "double_tap", "coordinate": [10, 10]},
        (0.01, 0.01),
    ),
    (
        "long_press(start_box='(1000,0)')",
        {"action": "long_press", "coordinate": [999, 0]},
        (1.0, 0.0),
    ),
    ("type(content='it\\'s \"ok\"')", {"action": "type", "text": 'it\'s "ok"'}, (None, None)),
    (
        "scroll(start_box='(500,500)', direction='down')",
        {"action": "swipe", "direction": "up", "coordinate": [500, 500]},
        (0.5, 0.5),
    ),
    ("scroll(direction='left')", {"action": "swipe", "direction": "right"}, (None, None)),
    ("open_app(app_name='Clock')", {"action": "open", "text": "Clock"}, (None, None)),
    ("press_home()", {"action": "system_button", "button": "home"}, (None, None)),
    ("press_back()", {"action": "system_button", "button": "back"}, (None, None)),
    ("hotkey(key='enter')", {"action": "system_button", "button": "enter"}, (None, None)),
    ("wait()", {"action": "wait"}, (None, None)),
    ("finished(content='done')", {"action": "terminate", "status": "success"}, (None, None)),
]


@pytest.mark.parametrize(("call", "expected", "point"), UI_TARS)
def test_ui_tars(call, expected, point):
    parsed = parse_response(f"Thought: I see the list.\nAction: {call}")
    assert parsed.fmt == "ui-tars"
    assert parsed.valid, parsed.error
    assert parsed.action == expected
    assert parsed.thinking == "I see the list."
    assert (parsed.x, parsed.y) == pytest.approx(point)


def test_ui_tars_drag():
    parsed = parse_response("Action: drag(start_box='(100,200)', end_box='(300,400)')")
    assert (parsed.x, parsed.y, parsed.x2, parsed.y2) == pytest.approx((0.1, 0.2, 0.3, 0.4))


def test_ui_tars_bad_box_and_unsupported_action():
    bad = parse_response("Action: click(start_box='somewhere')")
    assert bad.action_type == "click" and not bad.valid
    assert "'coordinate' must be two numbers" in bad.error
    other = parse_response("Action: call_user()")
    assert other.action_type == "unparsed"
    assert other.error == "unsupported UI-TARS action 'call_user'"


def test_ui_tars_out_of_range():
    parsed = parse_response("Action: click(start_box='(1001,5)')")
    assert parsed.error == "click: x=1001 in 'coordinate' is outside [0, 1000]"


# --- writing, summaries, registry, rows --------------------------------------------------


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


@pytest.mark.parametrize(
    ("action", "text"),
    [
        ({"action": "click", "coordinate": [512, 300]}, "click (512, 300)"),
        ({"action": "long_press", "coordinate": [1.5, 2]}, "long_press (1.5, 2)"),
        ({"action": "swipe", "direction": "up"}, "swipe up"),
        ({"action": "swipe", "direction": "up", "coordinate": [5, 9]}, "swipe up from (5, 9)"),
        (
            {"action": "drag", "start_coordinate": [1, 2], "end_coordinate": [3, 4]},
            "drag (1, 2) -> (3, 4)",
        ),
        ({"action": "type", "text": "hello"}, "type 'hello'"),
        ({"action": "open", "text": "Maps"}, "open 'Maps'"),
        ({"action": "answer", "text": "x" * 100}, "answer '" + "x" * 57 + "...'"),
        ({"action": "system_button", "button": "home"}, "system_button home"),
        ({"action": "wait"}, "wait"),
        ({"action": "terminate", "status": "fail"}, "terminate fail"),
        ({"action": "click"}, "click (?)"),
    ],
)
def test_action_summary(action, text):
    assert action_summary(action["action"], action) == text
    assert action_summary(action["action"], json.dumps(action)) == text


def test_action_summary_of_unparsed_and_bad_json():
    assert action_summary("unparsed", "{}") == "unparsed"
    assert action_summary(None, "not json") == "unparsed"


def test_every_registered_format_is_documented():
    doc = actions.__doc__
    formats_section = doc.split("Formats\n-------", 1)[1].split("Fallbacks\n", 1)[0]
    for name in actions.formats():
        assert re.search(rf"^``{re.escape(name)}``$", formats_section, re.MULTILINE), name


def test_register_format_extension_point():
    def parse_always_wait(text, image_size):
        return ParsedAction(
            thinking=None,
            action_type="wait",
            action={"action": "wait"},
            valid=True,
            fmt="test-wait",
        )

    register_format("test-wait", parse_always_wait)
    try:
        assert parse_response("anything", fmt="test-wait").action_type == "wait"
        assert parse_response("anything").action_type == "unparsed"  # not auto-detected
        with pytest.raises(ValueError, match="already registered"):
            register_format("test-wait", parse_always_wait)
    finally:
        actions.common._FORMATS.pop("test-wait")
    with pytest.raises(ValueError, match="reserved"):
        register_format("auto", parse_always_wait)


def test_to_row_fills_the_steps_columns():
    from episodelake.lake.core.schema import STEPS

    row = parse_response(
        mai({"action": "drag", "start_coordinate": [1, 2], "end_coordinate": [3, 4]})
    ).to_row()
    assert set(row) <= set(STEPS.names)
    assert json.loads(row["action"])["start_coordinate"] == [1, 2]
    assert row["action_valid"] is True and row["action_error"] is None
    bad = parse_response("nothing").to_row()
    assert (bad["action_type"], bad["action_valid"], bad["action"]) == ("unparsed", False, "{}")


# --- prompts ------------------------------------------------------------------------------


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


def test_system_prompts_describe_every_action_type():
    for prompt in (MAI_UI_SYSTEM_PROMPT, GUI_OWL_SYSTEM_PROMPT):
        for name in ACTION_TYPES:
            assert f'"action": "{name}"' in prompt


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


def test_gui_owl_messages():
    messages = build_messages(
        "Set an alarm",
        HISTORY,
        screenshot="now",
        style="gui-owl",
        history_length=1,
        image_part=lambda ref: {"type": "image"},
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    texts = [p["text"] for p in messages[1]["content"] if p["type"] == "text"]
    assert "Step 1: open 'Clock'" in texts[0] and "Step 3: wait" in texts[0]
    assert texts[1:] == ["Screenshot before step 3:", "Current screenshot:"]
    assert sum(p["type"] == "image" for p in messages[1]["content"]) == 2


def test_data_url_parts_and_history_from_a_row():
    part = data_url_part(b"\x89PNG")
    assert part["image_url"]["url"] == "data:image/png;base64,iVBORw=="
    step = HistoryStep.from_step(
        {"model_response": "r", "action_type": "click", "action": '{"coordinate": [1, 2]}'}, 7
    )
    assert (step.summary, step.image) == ("click (1, 2)", 7)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"style": "other"}, "style: unknown prompt style"),
        ({"history_length": -1}, "history_length"),
    ],
)
def test_build_messages_bad_arguments(kwargs, error):
    with pytest.raises(ValueError, match=error):
        build_messages("goal", [], **kwargs)
    with pytest.raises(ValueError, match=r"history\[0\]"):
        build_messages("goal", [HistoryStep()])
    with pytest.raises(ValueError, match="goal"):
        build_messages(" ", [])
