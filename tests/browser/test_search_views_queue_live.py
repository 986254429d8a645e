"""Finding and working through episodes: search from anywhere (/), saved views shared
through the lake, an annotation queue stepped with [ and ], and episodes recorded while the
page is open appearing without a reload."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import httpx
import pytest
from playwright.sync_api import expect

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.vocab.families import format_tool_call
from tests.api.webapp_support import screen

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def screen_at(page, step: int) -> None:
    page.wait_for_selector(f'[data-testid=screen][data-loaded-step="{step}"]')


def test_search_by_id_task_or_goal_and_enter_opens_the_episode(page):
    page.goto(page.base + "/")
    page.get_by_test_id("overview-policies").wait_for()
    page.keyboard.press("/")  # from anywhere, the search box
    page.keyboard.type("to ana")  # goal text: "Send 'hi' to Ana"
    options = page.get_by_role("option")
    options.filter(has_text="send_message-0").wait_for()
    assert [o.get_attribute("data-episode") for o in options.all()[:3]] == ["send_message-2", "send_message-1", "send_message-0"]
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/episodes/send_message-1/steps/0$"))
    screen_at(page, 0)

    page.keyboard.press("/")
    page.keyboard.type("WIFI_ON-2")  # an id prefix, any case
    page.locator("[role=option][data-episode=wifi_on-2]").wait_for()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/episodes/wifi_on-2/steps/0$"))
    screen_at(page, 0)
    page.keyboard.press("d")  # the replay has the keys again
    screen_at(page, 1)

    page.keyboard.press("/")
    page.keyboard.type("alarm")
    page.get_by_role("option", name=re.compile("All 3 matches as a filter")).click()
    page.wait_for_url(re.compile(r"/\?search=alarm$"))
    # the address changes first, the tree as soon as the filtered tasks are in
    expect(page.get_by_test_id("task-tree").locator(".task")).to_have_count(1)
    page.get_by_test_id("task-tree").get_by_text("set_alarm").wait_for()


def test_a_search_on_screens_not_read_yet_says_so_and_how(page, web_lake):
    page.goto(page.base + "/")
    page.get_by_test_id("overview-policies").wait_for()
    page.keyboard.press("/")
    page.keyboard.type("zebrafish")
    unread = page.get_by_test_id("unread-screens")
    unread.wait_for()
    pending = web_lake.dataset("steps").count_rows(filter="image_sha256 IS NOT NULL")
    assert f"The text of {pending} screenshots of {pending} is not read yet" in unread.inner_text()
    assert "elake enrich --what ocr" in unread.inner_text()
    page.keyboard.press("Escape")


def test_saved_views_are_created_opened_shared_and_deleted(page):
    page.goto(page.base + "/?success=false&task=wifi_on")
    page.get_by_test_id("overview-policies").wait_for()
    views = page.get_by_test_id("saved-views")
    views.get_by_role("button", name="save view…").click()
    views.get_by_label("view name").fill("wifi failures")
    views.get_by_label("view name").press("Enter")
    page.wait_for_url(re.compile(r"view=view-"))
    stored = httpx.get(page.base + "/api/views").json()
    assert [(v["name"], v["filters"]["success"], v["filters"]["task"]) for v in stored] == [("wifi failures", False, "wifi_on")]
    view_id = stored[0]["view_id"]

    page.goto(page.base + "/")  # another visit, no filters: the view is one choice away
    page.get_by_label("saved view").select_option(label="wifi failures")
    page.wait_for_url(re.compile(rf"/\?(?=.*success=false)(?=.*task=wifi_on)(?=.*view={view_id})"))
    tree = page.get_by_test_id("task-tree")
    expect(tree.locator(".task")).to_have_count(1)
    expect(tree.locator(".task")).to_contain_text("1✗")
    tree.get_by_text("wifi_on").wait_for()

    page.goto(f"{page.base}/views/{view_id}")  # the view's own link, to share
    page.wait_for_url(re.compile(rf"/\?(?=.*success=false)(?=.*view={view_id})"))
    expect(page.get_by_label("saved view")).to_have_value(view_id)

    views.get_by_role("button", name="delete view").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete view").click()
    page.wait_for_url(lambda url: "view=" not in url)
    assert httpx.get(page.base + "/api/views").json() == []
    page.get_by_text("Deleted the view “wifi failures”.").wait_for()


def test_annotation_queue_steps_through_the_filtered_episodes_with_brackets(page):
    page.goto(page.base + "/episodes/set_alarm-1/steps/0?success=false")
    screen_at(page, 0)
    position = page.get_by_test_id("queue-position")
    position.get_by_text("2 of 3").wait_for()
    page.keyboard.press("]")
    page.wait_for_url(re.compile(r"/episodes/wifi_on-1/steps/0\?success=false$"))
    position.get_by_text("3 of 3").wait_for()
    assert page.get_by_role("button", name="next episode").is_disabled()
    page.keyboard.press("[")
    position.get_by_text("2 of 3").wait_for()
    page.keyboard.press("[")
    page.wait_for_url(re.compile(r"/episodes/send_message-1/steps/0\?success=false$"))
    position.get_by_text("1 of 3").wait_for()
    page.keyboard.press("d")  # the step keys still work after a queue step
    screen_at(page, 1)

    page.keyboard.press("?")  # every key, [ and ] included, in one list
    help_ = page.get_by_test_id("keys-help")
    help_.get_by_text("previous / next episode in the list").wait_for()
    page.keyboard.press("Escape")
    assert not help_.is_visible()


def test_episodes_recorded_while_the_page_is_open_appear_without_a_reload(page, web_lake):
    page.goto(page.base + "/")
    page.get_by_test_id("overview-policies").wait_for()
    live = page.get_by_test_id("live")
    page.wait_for_selector("[data-testid=live][data-state=live]")
    page.get_by_role("button", name=re.compile("^▸ wifi_on")).click()
    tree = page.get_by_test_id("task-tree")
    tree.locator("[data-episode=wifi_on-0]").wait_for()
    page.evaluate("window.__stayed = true")  # gone if the page reloads

    with Recorder(web_lake, run_id="run-live", env="sim") as rec:
        ep = rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id="wifi_on-live", created_at=datetime.now(UTC))
        ep.log_step(screen(0, 0), format_tool_call({"action": "click", "coordinate": [500, 300]}, "go"))
        ep.finish(success=True, eval_score=1.0)
    tree.locator("[data-episode=wifi_on-live]").wait_for(timeout=10_000)
    assert page.evaluate("window.__stayed") is True
    assert "3✓" in tree.locator(".task", has_text="wifi_on").first.inner_text()

    live.click()  # pause
    page.wait_for_selector("[data-testid=live][data-state=paused]")
    assert live.get_attribute("aria-pressed") == "false"
    live.click()
    page.wait_for_selector("[data-testid=live][data-state=live]")


def test_stepping_and_the_queue_ask_the_api_nothing_the_cache_already_holds(page):
    """A step switch changes no query, the queue's neighbours are fetched ahead, and an
    episode seen a moment ago renders from the cache: none of these asks the API again."""
    page.goto(page.base + "/episodes/set_alarm-1/steps/0?success=false")
    screen_at(page, 0)
    position = page.get_by_test_id("queue-position")
    position.get_by_text("2 of 3").wait_for()
    page.wait_for_load_state("networkidle")  # the neighbours' details are in
    asked: list[str] = []
    live_poll = page.base + "/api/episodes?limit=1"  # every 2 s by design, whatever the cache holds
    page.on("request", lambda r: "/api/" in r.url and "/image" not in r.url and r.url != live_poll and asked.append(r.url))

    for step in (1, 2, 3):
        page.keyboard.press("d")
        screen_at(page, step)
    assert asked == []

    page.keyboard.press("]")  # the next episode's detail was fetched ahead
    page.wait_for_url(re.compile(r"/episodes/wifi_on-1/steps/0\?success=false$"))
    screen_at(page, 0)
    position.get_by_text("3 of 3").wait_for()
    page.keyboard.press("[")  # and the one just left is still fresh
    page.wait_for_url(re.compile(r"/episodes/set_alarm-1/steps/0\?success=false$"))
    screen_at(page, 0)
    position.get_by_text("2 of 3").wait_for()
    details = [u for u in asked if re.search(r"/api/episodes/[^/?]+(\?|$)", u)]
    assert details == [], asked
