"""UI-TARS: every call it writes, boxes and points, and what it cannot say."""

from __future__ import annotations

import pytest

from episodelake.lake.vocab.families import parse_response

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
