"""Qwen-VL: pixel coordinates placed by the image size, and its action names."""

from __future__ import annotations

import pytest

from episodelake.lake.vocab.families import parse_response
from tests.lake.vocab.families.support import mai

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
