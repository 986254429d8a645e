"""Edits on the replay in headless Chromium: retask, split before the step shown and delete,
each confirmed first and undone from its toast (the API and the lake do the work; see
tests/lake/ops/test_edits.py for the edits themselves)."""

from __future__ import annotations

import httpx
import pytest

from tests.browser.conftest import axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def episode(page, episode_id: str) -> httpx.Response:
    return httpx.get(f"{page.base}/api/episodes/{episode_id}", timeout=30)


def open_edits(page, episode_id: str, step: int):
    page.goto(f"{page.base}/episodes/{episode_id}/steps/{step}")
    page.wait_for_selector(f'[data-testid=screen][data-loaded-step="{step}"]')
    edits = page.get_by_test_id("episode-edits")
    edits.locator("summary").click()
    return edits


def confirm(page, button: str) -> None:
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    dialog.get_by_role("button", name=button).click()


def test_retask_asks_then_moves_the_episode_and_undo_puts_it_back(page):
    edits = open_edits(page, "set_alarm-1", 0)
    assert axe_violations(page) == []
    edits.get_by_label("task name").fill("set_alarm_fixed")
    edits.get_by_label("task goal").fill("Set an alarm for 7:30")
    edits.get_by_role("button", name="Retask").click()
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()  # asked first: nothing changed
    assert episode(page, "set_alarm-1").json()["episode"]["task_name"] == "set_alarm"
    edits.get_by_role("button", name="Retask").click()
    confirm(page, "Retask")
    page.locator(".episode-header").get_by_text("set_alarm_fixed").wait_for()
    stored = episode(page, "set_alarm-1").json()["episode"]
    assert (stored["task_name"], stored["task_goal"]) == ("set_alarm_fixed", "Set an alarm for 7:30")
    page.get_by_test_id("toast").get_by_role("button", name="Undo").click()
    page.get_by_test_id("toast").get_by_text("Undone").wait_for()
    assert episode(page, "set_alarm-1").json()["episode"]["task_name"] == "set_alarm"


def test_split_before_the_step_shown_and_delete_each_confirmed(page):
    before = episode(page, "set_alarm-2").json()
    n = len(before["steps"])
    assert n >= 3
    edits = open_edits(page, "set_alarm-2", 2)
    assert edits.get_by_role("button", name="Split before step 2").is_enabled()
    edits.get_by_role("button", name="Split before step 2").click()
    confirm(page, "Split")
    page.wait_for_url(f"{page.base}/episodes/set_alarm-2.2/steps/0")
    assert len(episode(page, "set_alarm-2").json()["steps"]) == 2
    assert len(episode(page, "set_alarm-2.2").json()["steps"]) == n - 2
    page.get_by_test_id("toast").get_by_role("button", name="Undo").click()
    page.get_by_test_id("toast").get_by_text("Undone").wait_for()
    assert len(episode(page, "set_alarm-2").json()["steps"]) == n
    assert episode(page, "set_alarm-2.2").status_code == 404

    edits = open_edits(page, "set_alarm-2", 0)
    assert not edits.get_by_role("button", name="Split before step 0").is_enabled()  # nothing before it
    edits.get_by_role("button", name="Delete episode").click()
    confirm(page, "Delete episode")
    page.wait_for_url(f"{page.base}/")
    assert episode(page, "set_alarm-2").status_code == 404
    page.get_by_test_id("toast").get_by_role("button", name="Undo").click()
    page.get_by_test_id("toast").get_by_text("Undone").wait_for()
    assert len(episode(page, "set_alarm-2").json()["steps"]) == n
