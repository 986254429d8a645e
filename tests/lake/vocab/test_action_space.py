"""The action space: how a stored action reads as one line."""

from __future__ import annotations

import json

import pytest

from episodelake.lake.vocab.action_space import action_summary


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
