"""Compare with more than two episodes (issue 24, 4): episodes of any task added from the
page, each column under its task and goal, all stepping together, the list in the address
(a comparison opens from its link), removing one; the two-episode addresses still open."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import axe_violations, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
GOALS = {"wifi_on": "Turn on Wi-Fi", "set_alarm": "Set an alarm for 7:30", "send_message": "Send 'hi' to Ana"}


def column_steps(page) -> list[str]:
    return page.get_by_test_id("compare-column-step").all_inner_texts()


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["1280x800", "390x844"])
def test_compare_many_episodes_of_any_task(page, size):
    page.set_viewport_size(size)
    # a two-episode address, as the replay's "Compare with" writes it, still opens
    page.goto(page.base + "/compare/wifi_on-2/wifi_on-1?step=1")
    expect(page.get_by_test_id("compare-step")).to_have_text("step 1 (2/6)")
    expect(page.get_by_test_id("compare-column")).to_have_count(2)

    # add an episode of another task: found by its task, listed under it
    page.get_by_test_id("compare-add-search").fill("set_alarm")
    add = page.get_by_test_id("compare-add")
    expect(add.locator("optgroup[label=set_alarm] option[value='set_alarm-2']")).to_have_count(1)
    expect(add.locator("option[value='wifi_on-0']")).to_have_count(0)
    add.select_option("set_alarm-2")
    page.wait_for_url(re.compile(r"/compare/wifi_on-2/wifi_on-1/set_alarm-2\?step=1$"))
    # and one more, of a third task, from the whole list
    page.get_by_test_id("compare-add-search").fill("")
    expect(add.locator("option[value='wifi_on-2']")).to_have_count(0)  # already compared
    add.select_option("send_message-0")
    page.wait_for_url(re.compile(r"/compare/wifi_on-2/wifi_on-1/set_alarm-2/send_message-0\?step=1$"))
    columns = page.get_by_test_id("compare-column")
    expect(columns).to_have_count(4)
    for i, (task, goal) in enumerate([("wifi_on", GOALS["wifi_on"]), ("wifi_on", GOALS["wifi_on"]),
                                      ("set_alarm", GOALS["set_alarm"]), ("send_message", GOALS["send_message"])]):
        expect(columns.nth(i).locator(".compare-task")).to_have_text(f"{task} · {goal}")
    expect(page.get_by_test_id("compare")).to_contain_text("These episodes are of 3 tasks.")
    assert page.locator(".compare-table thead th").all_inner_texts() == ["#", "wifi_on-2", "wifi_on-1", "set_alarm-2", "send_message-0"]

    # all step together with the keys; the shorter ones end first (send_message-0 has 4 steps)
    page.keyboard.press("d")
    expect(page.get_by_test_id("compare-step")).to_have_text("step 2 (3/6)")
    assert column_steps(page) == ["step 2 (3/6)", "step 2 (3/5)", "step 2 (3/6)", "step 2 (3/4)"]
    page.keyboard.press("End")
    expect(page.get_by_test_id("compare-step")).to_have_text("step 5 (6/6)")
    expect(columns.nth(3)).to_contain_text("This episode ended before this step.")
    assert page.url.endswith("/compare/wifi_on-2/wifi_on-1/set_alarm-2/send_message-0?step=5")
    if size is LAPTOP:  # side by side in one row; on a phone they stack
        tops = [columns.nth(i).bounding_box()["y"] for i in range(4)]
        assert max(tops) - min(tops) < 2, tops
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
    assert axe_violations(page) == []
    shot(page, f"compare-four-{size['width']}")

    # the link opens the same comparison
    link = page.url
    page.goto(page.base + "/")
    page.goto(link)
    expect(page.get_by_test_id("compare-column")).to_have_count(4)
    expect(page.get_by_test_id("compare-step")).to_have_text("step 5 (6/6)")

    # removing one keeps the others and the step
    page.get_by_role("button", name="remove wifi_on-1 from the comparison").click()
    page.wait_for_url(re.compile(r"/compare/wifi_on-2/set_alarm-2/send_message-0\?step=5$"))
    expect(page.get_by_test_id("compare-column")).to_have_count(3)
    page.keyboard.press("a")
    expect(page.get_by_test_id("compare-step")).to_have_text("step 4 (5/6)")


def test_compare_holds_at_most_six_and_a_missing_episode_can_be_dropped(page):
    page.set_viewport_size(LAPTOP)
    ids = ["wifi_on-0", "wifi_on-1", "wifi_on-2", "set_alarm-0", "set_alarm-1", "set_alarm-2"]
    page.goto(page.base + "/compare/" + "/".join(ids) + "?step=0")
    expect(page.get_by_test_id("compare-column")).to_have_count(6)
    expect(page.get_by_test_id("compare-full")).to_contain_text("remove one to add another")
    expect(page.get_by_test_id("compare-add")).to_have_count(0)
    assert axe_violations(page) == []
    shot(page, "compare-six-1280")

    page.goto(page.base + "/compare/wifi_on-0/no-such-episode?step=0")
    expect(page.get_by_role("alert")).to_contain_text("no-such-episode")
    page.get_by_role("button", name="Compare without no-such-episode").click()
    page.wait_for_url(re.compile(r"/compare/wifi_on-0\?step=0$"))
    expect(page.get_by_test_id("compare-column")).to_have_count(1)
    expect(page.get_by_test_id("compare-add")).to_be_visible()
