"""The web app in headless Chromium: browse, replay with the keyboard, overlay, curate,
reload, compare; plus every page opening directly from its URL."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from episodelake.api.settings import Settings, default_static_dir
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.vocab.families import format_tool_call
from tests.api.webapp_support import ServerThread, screen
from tests.browser.conftest import shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def screen_at(page, step: int) -> None:
    page.wait_for_selector(f'[data-testid=screen][data-loaded-step="{step}"]')


def test_replay_curate_reload_compare(page):
    page.goto(page.base + "/")
    tree = page.get_by_test_id("task-tree")
    tree.get_by_text("wifi_on").wait_for()
    assert tree.locator(".task").count() == 3
    shot(page, "01-task-tree")

    tree.get_by_text("wifi_on").click()
    page.locator('[data-episode="wifi_on-1"]').click()
    page.wait_for_url(re.compile(r"/episodes/wifi_on-1/steps/0$"))
    screen_at(page, 0)
    assert page.locator('[data-testid=overlay][data-action="click"] [data-marker="click"]').count() == 1
    assert page.get_by_test_id("filmstrip").locator("button").count() == 5
    shot(page, "02-episode-step0-click")

    page.keyboard.press("d")
    screen_at(page, 1)
    assert page.url.endswith("/episodes/wifi_on-1/steps/1")
    assert page.locator('[data-marker="long_press"]').count() == 1
    # every marker, not only the red ones, sits on a white outline: one behind each shape
    halos = page.locator('[data-marker="long_press"] [data-halo]')
    assert halos.count() == 3 and {h.get_attribute("stroke") or h.get_attribute("fill") for h in halos.all()} == {"#ffffff"}
    page.keyboard.press("ArrowRight")
    screen_at(page, 2)
    assert page.locator('[data-marker="swipe"]').count() == 1
    assert page.locator('[data-marker="swipe"] [data-halo]').count() == 3  # line, arrow head, start dot
    page.keyboard.press("ArrowRight")
    screen_at(page, 3)
    assert page.locator('[data-marker="drag"]').count() == 1
    shot(page, "03-drag")
    page.keyboard.press("a")
    page.keyboard.press("ArrowLeft")
    screen_at(page, 1)

    # model text is shown as text, never run as HTML
    thinking = page.get_by_test_id("thinking").inner_text()
    assert "<script>window.__xss=1</script>" in thinking
    assert page.evaluate("window.__xss") is None
    assert page.get_by_test_id("step-panel").get_by_text("went the wrong way").is_visible()

    # overlay toggle: key O and the checkbox
    page.keyboard.press("o")
    assert page.locator("[data-testid=overlay]").count() == 0
    shot(page, "04-original")
    page.get_by_test_id("overlay-toggle").click()
    assert page.locator("[data-testid=overlay]").count() == 1

    # a new failure set becomes the one filed into; F marks this step as the failing one,
    # key 1 sets the category grounding (and saves the note)
    page.get_by_test_id("note").fill("tapped the wrong toggle")
    page.get_by_label("New failure set name").fill("failures")
    page.get_by_role("button", name="Create").click()
    page.get_by_test_id("curation-target").get_by_text("failures").wait_for()
    page.locator("body").click(position={"x": 5, "y": 300})  # leave the form: keys are shortcuts again
    page.keyboard.press("f")
    page.get_by_test_id("memberships").get_by_text("failing step 1").wait_for()
    page.keyboard.press("1")
    page.get_by_test_id("toast").get_by_text(re.compile("Saved in failures: grounding")).wait_for()
    page.get_by_test_id("memberships").get_by_text("grounding").wait_for()
    assert page.get_by_test_id("step-counter").inner_text().startswith("step 1")  # curation keeps the step
    shot(page, "05-curated")

    page.reload()
    screen_at(page, 1)
    members = page.get_by_test_id("memberships")
    members.get_by_text("grounding").wait_for()
    assert "failing step 1" in members.inner_text() and "tapped the wrong toggle" in members.inner_text()
    stored = httpx.get(page.base + "/api/episodes/wifi_on-1").json()["memberships"]
    assert [(m["set_name"], m["failure_category"], m["failing_step"]) for m in stored] == [("failures", "grounding", 1)]

    # a link to this episode's first step moves the replay there, from any step
    page.keyboard.press("d")
    screen_at(page, 2)
    page.locator('[data-episode="wifi_on-1"]').click()
    screen_at(page, 0)
    assert page.url.endswith("/episodes/wifi_on-1/steps/0")
    page.go_back()
    screen_at(page, 2)  # back to where the replay was: history holds navigations, not key presses

    # compare with another episode of the task, aligned on the step
    page.keyboard.press("a")
    screen_at(page, 1)
    page.get_by_test_id("compare-select").select_option("wifi_on-0")
    page.wait_for_url(re.compile(r"/compare/wifi_on-1/wifi_on-0\?step=1$"))  # aligned on step 1
    page.get_by_test_id("compare").locator("[data-testid=screen]").nth(1).wait_for()
    assert page.get_by_test_id("compare").locator("[data-testid=screen]").count() == 2
    page.keyboard.press("d")
    page.wait_for_url(re.compile(r"step=2$"))
    shot(page, "06-compare")


def test_sets_page_lists_the_curated_episode(page):
    sid = httpx.post(page.base + "/api/sets", json={"name": "regressions", "kind": "regression"}).json()["set_id"]
    httpx.put(f"{page.base}/api/sets/{sid}/members/set_alarm-1", json={"failure_category": "planning", "failing_step": 2, "note": "looped"})
    page.goto(page.base + "/sets")
    page.get_by_test_id("sets-page").get_by_role("link", name="regressions").click()
    page.get_by_test_id("set-page").wait_for()
    assert page.url.endswith(f"/sets/{sid}")
    row = page.get_by_test_id("members").locator("tbody tr")
    row.first.wait_for()
    assert "set_alarm-1" in row.first.inner_text() and "planning" in row.first.inner_text()
    shot(page, "07-set")
    # a teammate files another episode into the set: it shows within seconds, without a reload
    page.evaluate("window.__stayed = true")
    httpx.put(f"{page.base}/api/sets/{sid}/members/wifi_on-0", json={"failure_category": "grounding"})
    row.filter(has_text="wifi_on-0").wait_for(timeout=10_000)
    assert page.evaluate("window.__stayed") is True


@pytest.mark.parametrize("url, testid, text", [
    ("/episodes/wifi_on-2/steps/3", "step-counter", "step 3"),
    ("/episodes/send_message-2/steps/2", "screen", "No screenshot"),
    ("/groups/g-wifi_on", "group-page", "anchor states"),
    ("/stats", "stats-page", "episodes"),
    ("/sql?q=select%20count(*)%20as%20n%20from%20steps", "sql-results", "45"),
])
def test_every_view_opens_from_its_url(page, url, testid, text):
    page.goto(page.base + url)
    page.get_by_test_id(testid).get_by_text(re.compile(text)).first.wait_for()
    shot(page, "url-" + re.sub(r"[^a-z0-9]+", "-", url.lower()).strip("-")[:40])


def test_errors_are_shown_not_a_blank_page(page):
    page.goto(page.base + "/episodes/no-such-episode/steps/0")
    alert = page.get_by_role("alert").first
    alert.wait_for()
    assert "no-such-episode" in alert.inner_text()
    page.goto(page.base + "/sql?q=drop%20table%20steps")
    page.get_by_role("alert").get_by_text(re.compile("The query failed: .*not allowed")).wait_for()
    page.goto(page.base + "/nowhere")
    page.get_by_role("alert").get_by_text("No page at /nowhere").wait_for()
    shot(page, "08-errors")


SVG_STATE = """() => {
  const svg = document.querySelector('[data-testid=overlay]');
  const g = svg.querySelector('[data-marker]');
  const at = (role) => { const c = svg.querySelector(`circle[data-point=${role}]`);
                         return c ? [+c.getAttribute('cx'), +c.getAttribute('cy')] : null; };
  const tip = svg.querySelector('polygon[data-point=end]');
  const badge = document.querySelector('[data-testid=badge]');
  return {kind: g ? g.dataset.marker : 'none', start: at('start'), end: at('end'),
          tip: tip ? tip.getAttribute('points').split(' ')[0].split(',').map(Number) : null,
          lines: g ? g.querySelectorAll('line').length : 0,
          badge: badge ? [badge.className, badge.textContent] : null};
}"""


def test_overlay_draws_the_steps_action_view(browser, tmp_path):
    """The SVG overlay draws the API's description: a drag without its end (its start dot and
    a problem badge, as ?annotated=1 draws it) and a swipe given only a direction."""
    actions = [{"action": "drag", "start_coordinate": [100, 200]}, {"action": "swipe", "direction": "left"}]
    with Recorder(tmp_path / "lake", run_id="run-1") as rec:
        ep = rec.start_episode("odd", "odd actions", episode_id="odd-0")
        for k, action in enumerate(actions):
            ep.log_step(screen(0, k), format_tool_call(action))
        ep.finish(success=False)
    with ServerThread(Settings(lake=tmp_path / "lake", static_dir=default_static_dir())) as srv:
        steps = httpx.get(srv.url + "/api/episodes/odd-0").json()["steps"]
        page = browser.new_page()
        try:
            for s in steps:
                page.goto(f"{srv.url}/episodes/odd-0/steps/{s['step']}")
                screen_at(page, s["step"])
                view, svg = s["action_view"], page.evaluate(SVG_STATE)
                pts = [pytest.approx([p["x"] * s["width"], p["y"] * s["height"]]) for p in view["marker"]["points"]]
                assert svg["kind"] == view["marker"]["kind"] and svg["start"] == pts[0]
                if view["marker"]["kind"] == "drag":
                    assert len(pts) == 1 and svg["end"] is None and svg["lines"] == 0
                    assert svg["badge"] == [f"badge badge-{view['badge']}", view["summary"]]
                    assert view["badge"] == "problem" and view["summary"] == "drag (100, 200) -> (?)"
                else:
                    assert svg["tip"] == pts[1] and svg["badge"] is None and view["summary"] == "swipe left"
                shot(page, f"overlay-{view['marker']['kind']}")
        finally:
            page.close()


def test_a_refresh_that_fails_keeps_the_page_and_says_so_above_it(page, web_lake):
    """Queries are not retried: when a list's refresh fails (a busy server's one bad answer),
    the list shown stays, with the failure and a Retry above it, instead of the page blanking."""
    page.goto(page.base + "/")
    tree = page.get_by_test_id("task-tree")
    tree.get_by_text("wifi_on").wait_for()

    def refuse(route):
        return route.fulfill(status=503, content_type="application/json",
                             body='{"error": {"type": "StoreUnavailable", "message": "the store did not answer"}}')

    listing = re.compile(r".*/api/tasks(\?.*)?$")
    page.route(listing, refuse)
    # a collector records an episode: the live updates refresh the tree, and the refresh is refused
    with Recorder(web_lake.path, run_id="run-late") as rec:
        ep = rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id="wifi_on-late")
        ep.log_step(screen(0, 0), format_tool_call({"action": "wait", "time": 1}))
        ep.finish(success=True)
    alert = tree.get_by_role("alert").filter(has_text="Could not load the latest tasks")
    alert.wait_for()
    assert "the store did not answer" in alert.inner_text()
    expect(tree.get_by_text("wifi_on")).to_be_visible()  # the tree is still there
    page.unroute(listing)
    alert.get_by_role("button", name="Retry").click()
    expect(alert).to_have_count(0)
    expect(tree.get_by_role("button", name=re.compile("wifi_on"))).to_contain_text("3✓")
