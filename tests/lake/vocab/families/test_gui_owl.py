"""GUI-Owl: its Action line, its 1000-wide grid, its argument names, and its single-turn
prompt layout."""

from __future__ import annotations

import pytest

from episodelake.lake.vocab.action_space import ACTION_TYPES
from episodelake.lake.vocab.families import parse_response
from episodelake.lake.vocab.families.gui_owl import SYSTEM_PROMPT
from episodelake.lake.vocab.prompts import build_messages
from tests.lake.vocab.families.support import HISTORY, mai

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


def test_system_prompt_describes_every_action_type():
    for name in ACTION_TYPES:
        assert f'"action": "{name}"' in SYSTEM_PROMPT


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
