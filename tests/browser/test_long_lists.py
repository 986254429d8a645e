"""Long lists hold only the rows in view: a set of 3,000 members and a task tree of 120 tasks
render a few dozen rows each, scroll to the end, stay one table or tree for screen readers
(axe-core passes), and Tab still walks from row to row past the rows first drawn."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.curation import curation
from episodelake.lake.vocab.families import format_tool_call
from tests.api.webapp_support import screen
from tests.browser.conftest import axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MEMBERS = 3000
TASKS = 120


@pytest.fixture(scope="module")
def long_set(web_lake) -> str:
    """A set of MEMBERS members, written as one commit (the members need not be episodes here)."""
    s = curation.create_set(web_lake, "every far episode", "failure")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    web_lake.upsert("set_members", [
        {"set_id": s["set_id"], "episode_id": f"far-{i:04d}", "failure_category": "planning", "failing_step": None,
         "note": None, "added_by": None, "added_at": start + timedelta(seconds=i), "removed": False}
        for i in range(MEMBERS)])
    return s["set_id"]


def test_a_long_set_draws_only_the_members_in_view(page, long_set):
    page.goto(f"{page.base}/sets/{long_set}")
    table = page.get_by_test_id("members")
    table.get_by_role("link", name="far-0000").wait_for()
    assert table.get_attribute("aria-rowcount") == str(MEMBERS + 1)
    drawn = table.locator("tbody tr:not(.spacer)").count()
    assert 10 < drawn < 80, drawn
    assert table.locator("tbody tr:not(.spacer)").nth(5).get_attribute("aria-rowindex") == "7"
    assert not axe_violations(page)

    # Tab walks on past the rows first drawn: each row is a link, its review's failing step
    # and choice, a remove button and the next row's tick box
    table.get_by_role("link", name="far-0000").focus()
    for _ in range(5 * 60):
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "far-0060"
    assert table.locator("tbody tr:not(.spacer)").count() < 80

    # the end of the list is a scroll away, at its full height
    page.get_by_test_id("members-scroll").evaluate("el => { el.scrollTop = el.scrollHeight; }")
    last = table.get_by_role("link", name=f"far-{MEMBERS - 1:04d}")
    last.wait_for()
    assert table.locator("tbody tr:not(.spacer)").count() < 80
    last.click()
    page.wait_for_url(re.compile(rf"/episodes/far-{MEMBERS - 1:04d}/steps/0$"))


@pytest.fixture(scope="module")
def many_tasks(web_lake) -> None:
    done = format_tool_call({"action": "terminate", "status": "success"})
    with Recorder(web_lake, run_id="run-many") as rec:
        for t in range(TASKS):
            with rec.start_episode(f"zz_task_{t:03d}", "One of many tasks", episode_id=f"many-{t:03d}") as ep:
                ep.log_step(screen(t % 3, 0), done)
                ep.finish(success=t % 2 == 0, eval_score=float(t % 2 == 0))


def test_a_long_task_tree_draws_only_the_tasks_in_view(page, many_tasks):
    page.goto(f"{page.base}/")
    tree = page.get_by_test_id("task-tree")
    tree.locator(".task").first.wait_for()
    drawn = tree.locator(".task").count()
    assert 10 < drawn < 80, drawn
    assert not axe_violations(page)
    # the last task is a scroll away; it opens into its episode, and the replay plays it
    page.locator("aside.left").evaluate("el => { el.scrollTop = el.scrollHeight; }")
    last = tree.get_by_role("button", name=re.compile(f"zz_task_{TASKS - 1:03d}"))
    last.click()
    expect(last).to_have_attribute("aria-expanded", "true")
    tree.locator(f"[data-episode=many-{TASKS - 1:03d}]").click()
    page.wait_for_url(re.compile(rf"/episodes/many-{TASKS - 1:03d}/steps/0$"))
    page.wait_for_selector('[data-testid=screen][data-loaded-step="0"]')
    assert tree.locator(".task").count() < 80
