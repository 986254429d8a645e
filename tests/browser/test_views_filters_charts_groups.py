"""Issue 24's items 4, 6, 8 and 9, as a person meets them at 1280x800 and 390x844: a saved
view that was changed says so and can be updated or saved as another; "more filters" fits
the sidebar and picks a set by name; success by policy version keeps runs apart; the groups
page keeps thumbnails' shape, ids whole and says what its numbers are; Compare names each
episode's task and goal, counts steps as the replay does and keeps its click marker visible."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from episodelake.api.settings import Settings, default_static_dir
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.vocab.families import format_tool_call
from tests.api.webapp_support import ServerThread, screen
from tests.browser.conftest import axe_violations, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


# 4 ---------------------------------------------------------------------------------------
def test_a_changed_saved_view_is_marked_modified_and_can_be_updated_or_saved_as_another(page):
    """Issue 24, 4: after its filters changed, an open view showed as open with no mark and no
    way to keep the change; now it is marked "modified", "Update view" replaces its filters
    (recorded in the audit log) and "Save as…" keeps the change as a new view."""
    page.set_viewport_size(LAPTOP)
    r = httpx.post(page.base + "/api/views", json={"name": "wifi failures 4", "filters": {"task": "wifi_on", "success": False}})
    assert r.status_code == 201, r.text
    view_id = r.json()["view_id"]
    page.goto(f"{page.base}/views/{view_id}")
    page.wait_for_url(re.compile(rf"view={view_id}"))
    views = page.get_by_test_id("saved-views")
    expect(page.get_by_label("saved view")).to_have_value(view_id)
    expect(views.get_by_test_id("view-modified")).to_have_count(0)
    expect(views.get_by_role("button", name="Update view")).to_have_count(0)

    page.get_by_label("outcome").select_option("true")  # the view's filter, changed
    page.wait_for_url(re.compile(r"success=true"))
    assert f"view={view_id}" in page.url
    expect(views.get_by_test_id("view-modified")).to_have_text(re.compile("modified"))
    assert axe_violations(page) == []
    shot(page, "saved-view-modified")
    views.get_by_role("button", name="Update view").click()
    page.get_by_text("Updated the view “wifi failures 4”.").wait_for()
    stored = httpx.get(f"{page.base}/api/views/{view_id}").json()
    assert stored["filters"]["success"] is True and stored["filters"]["task"] == "wifi_on", stored
    expect(views.get_by_test_id("view-modified")).to_have_count(0)
    changes = httpx.get(page.base + "/api/audit", params={"target_id": view_id}).json()
    assert [c["action"] for c in changes][:2] == ["view.update", "view.create"], changes

    page.get_by_label("outcome").select_option("")  # changed again: kept as another view
    expect(views.get_by_test_id("view-modified")).to_be_visible()
    views.get_by_role("button", name="Save as…").click()
    views.get_by_label("view name").fill("all wifi 4")
    views.get_by_label("view name").press("Enter")
    page.get_by_text("Saved the view “all wifi 4”.").wait_for()
    new = next(v for v in httpx.get(page.base + "/api/views").json() if v["name"] == "all wifi 4")
    page.wait_for_url(re.compile(rf"view={new['view_id']}"))
    assert {k: v for k, v in new["filters"].items() if v not in (None, False)} == {"task": "wifi_on"}, new
    assert httpx.get(f"{page.base}/api/views/{view_id}").json()["filters"]["success"] is True  # the old one kept
    expect(views.get_by_test_id("view-modified")).to_have_count(0)


# 6 ---------------------------------------------------------------------------------------
FORM_FITS = """() => {
  // every field of "more filters" inside the sidebar's visible box, none scrolled away sideways
  const left = document.querySelector('aside.left');
  const box = left.getBoundingClientRect();
  const out = [];
  for (const el of document.querySelectorAll('[data-testid=filters] form :is(input, select, textarea, button)')) {
    const r = el.getBoundingClientRect();
    if (r.left < box.left - 0.5 || r.right > box.left + left.clientWidth + 0.5) out.push(el.name || el.textContent);
  }
  return {outside: out, scroll: left.scrollWidth - left.clientWidth};
}"""


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["1280x800", "390x844"])
def test_more_filters_fit_the_sidebar_and_pick_a_set_by_name(page, size):
    """Issue 24, 6: the form under "more filters" ran past the 290 px sidebar (its right column
    clipped) and "set id" was a box for a raw id; now it fits at both widths and the set is
    picked by its name."""
    page.set_viewport_size(size)
    r = httpx.post(page.base + "/api/sets", json={"name": f"wifi picks {size['width']}", "kind": "failure"})
    assert r.status_code == 201, r.text
    set_id = r.json()["set_id"]
    assert httpx.put(f"{page.base}/api/sets/{set_id}/members/wifi_on-1", json={}).status_code == 200
    page.goto(page.base + "/")
    page.get_by_test_id("overview-policies").wait_for()
    filters = page.get_by_test_id("filters")
    filters.get_by_role("button", name="more filters").click()
    picker = filters.get_by_label("set", exact=True)
    expect(picker).to_be_visible()
    assert picker.evaluate("e => e.tagName") == "SELECT"
    fit = page.evaluate(FORM_FITS)
    assert fit == {"outside": [], "scroll": 0}, fit
    assert axe_violations(page) == []
    shot(page, f"more-filters-{size['width']}")
    picker.select_option(label=f"wifi picks {size['width']}")
    filters.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(rf"set_id={set_id}"))
    tree = page.get_by_test_id("task-tree")
    tree.get_by_text("wifi_on").first.wait_for()
    expect(tree.get_by_text("set_alarm")).to_have_count(0)
    expect(page.get_by_test_id("filters").get_by_label("set", exact=True)).to_have_value(set_id)


# 8 ---------------------------------------------------------------------------------------
SERIES = """() => { const el = document.querySelector('[data-testid=success-chart]'), u = el.plot, xs = el.xLabels;
  return Object.fromEntries(u.series.slice(1).filter(s => s.label).map((s, i) =>
    [s.label, u.data[i + 1].map((v, j) => v === null ? null : [xs[j], v]).filter(Boolean)])); }"""


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two unrelated runs: run-a's policies 10, 20, 30 (getting better), run-b's 2, 5 (worse)."""
    path = tmp_path_factory.mktemp("runs") / "lake"
    plan = {"run-a": {"10": [0, 0], "20": [1, 0], "30": [1, 1]}, "run-b": {"2": [1, 1], "5": [0, 1]}}
    for run, versions in plan.items():
        with Recorder(path, run_id=run, image_checks="structure") as rec:
            for version, outcomes in versions.items():
                for t, ok in enumerate(outcomes):
                    ep = rec.start_episode(f"task_{t}", f"goal {t}", episode_id=f"{run}-{version}-{t}", policy_version=version)
                    ep.log_step(screen(0, 0, size=(40, 80)), format_tool_call({"action": "terminate", "status": "success"}))
                    ep.finish(success=bool(ok))
    with ServerThread(Settings(lake=path, static_dir=default_static_dir())) as srv:
        yield srv


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["1280x800", "390x844"])
def test_success_by_policy_version_keeps_runs_apart(browser, two_runs, size):
    """Issue 24, 8: the Stats chart joined the policy versions of unrelated runs into one line
    per task (and the Overview summed a version over runs); now it draws one line per run, each
    through its own versions only, a run can be picked to see its tasks, and the Overview
    counts each run's versions apart."""
    page = browser.new_page()
    page.set_viewport_size(size)
    try:
        page.goto(two_runs.url + "/stats")
        page.wait_for_function("() => document.querySelector('[data-testid=success-chart]')?.plot")
        lines = page.evaluate(SERIES)
        assert lines == {"run-a": [["10", 0], ["20", 0.5], ["30", 1]], "run-b": [["2", 1], ["5", 0.5]]}, lines
        chart = page.get_by_test_id("stats-page")
        assert chart.locator(".legend").inner_text().split() == ["run-a", "run-b"]
        assert axe_violations(page) == []
        shot(page, f"stats-runs-{size['width']}")
        chart.get_by_label("lines").select_option("run-b")  # one run: a line per task, its versions
        page.wait_for_url(re.compile(r"run_id=run-b"))
        # the run's own chart (its tasks' lines), not the one before (two runs' lines: also 3 series)
        page.wait_for_function("() => document.querySelector('[data-testid=success-chart]')?.plot?.series.some(s => s.label === 'task_0')")
        lines = page.evaluate(SERIES)
        assert lines == {"task_0": [["2", 1], ["5", 0]], "task_1": [["2", 1], ["5", 1]]}, lines

        page.goto(two_runs.url + "/")
        rows = page.get_by_test_id("overview-policies").locator("tbody tr")
        rows.first.wait_for()
        texts = [" ".join(t.split()) for t in rows.all_inner_texts()]
        assert texts == ["10 run-a 0% 0/2", "20 run-a 50% 1/2", "30 run-a 100% 2/2",
                         "2 run-b 100% 2/2", "5 run-b 50% 1/2"], texts
        assert axe_violations(page) == []
        page.get_by_test_id("overview-policies").get_by_role("link", name="5", exact=True).click()
        page.wait_for_url(re.compile(r"/\?(?=.*run_id=run-b)(?=.*policy_version=5)"))
    finally:
        page.close()


# 9 ---------------------------------------------------------------------------------------
CARDS = """() => [...document.querySelectorAll('[data-testid=anchor-row] .card')].map(c => {
  const img = c.querySelector('img'), id = c.querySelector('.card-id');
  const lines = new Set([...(() => { const r = document.createRange(); r.selectNodeContents(id); return r.getClientRects(); })()]
    .filter(b => b.width > 0).map(b => Math.round(b.top)));
  return {ratio: img.clientWidth / img.clientHeight, natural: img.naturalWidth / img.naturalHeight,
          id: id.textContent, idLines: lines.size, hyphens: getComputedStyle(id).hyphens, text: c.innerText,
          titles: [...c.querySelectorAll('[title]')].map(e => e.title).join(' | ')};
})"""


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["1280x800", "390x844"])
def test_group_cards_keep_the_screens_shape_whole_ids_and_say_what_r_and_a_are(page, size):
    """Issue 24, 9: a group's thumbnails were squashed into squares, ids cut (with a hyphen)
    and "R"/"A" left unexplained."""
    page.set_viewport_size(size)
    page.goto(page.base + "/groups/g-wifi_on")
    page.get_by_test_id("anchor-row").first.wait_for()
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=anchor-row] .card img')].every(i => i.complete && i.naturalWidth)")
    cards = page.evaluate(CARDS)
    assert cards
    for c in cards:
        assert c["ratio"] == pytest.approx(c["natural"], rel=0.03), c  # 270x600 screens stay tall
        assert re.fullmatch(r"wifi_on-\d", c["id"]) and c["idLines"] == 1 and c["hyphens"] != "auto", c
        assert re.search(r"return -?\d", c["text"]) and re.search(r"advantage -?\d", c["text"]), c
        assert "discounted return" in c["titles"] and "advantage" in c["titles"], c
    legend = page.get_by_test_id("group-legend")
    expect(legend).to_contain_text("return")
    expect(legend).to_contain_text("advantage")
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
    assert axe_violations(page) == []
    shot(page, f"group-cards-{size['width']}")


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["1280x800", "390x844"])
def test_compare_names_task_and_goal_counts_steps_as_the_replay_and_keeps_the_click_marker_visible(page, size):
    """Issue 24, 9: Compare showed ids only, counted "step index 2 of 6" where the replay said
    "step 2 (3/6)", and its red click marker vanished on red icons."""
    page.set_viewport_size(size)
    page.goto(page.base + "/episodes/wifi_on-2/steps/2")
    page.wait_for_selector('[data-testid=screen][data-loaded-step="2"]')
    replay_counter = page.get_by_test_id("step-counter").inner_text()
    assert replay_counter == "step 2 (3/6)"
    page.get_by_test_id("compare-select").select_option("wifi_on-1")
    page.wait_for_url(re.compile(r"/compare/wifi_on-2/wifi_on-1\?step=2$"))
    expect(page.get_by_test_id("compare-step")).to_have_text(replay_counter)
    page.goto(page.base + "/compare/wifi_on-2/set_alarm-1?step=2")  # two tasks
    expect(page.get_by_test_id("compare-step")).to_have_text(replay_counter)
    compare = page.get_by_test_id("compare")
    for task, goal in (("wifi_on", "Turn on Wi-Fi"), ("set_alarm", "Set an alarm for 7:30")):
        expect(compare.get_by_text(task, exact=True)).to_be_visible()
        expect(compare.get_by_text(goal, exact=True)).to_be_visible()
    page.keyboard.press("Home")
    expect(page.get_by_test_id("compare-step")).to_have_text("step 0 (1/6)")
    assert page.url.endswith("?step=0")
    # step 0 is a click: its red marker sits on a white halo, so a red icon under it leaves it seen
    halo = page.evaluate("""() => [...document.querySelectorAll('[data-marker=click]')].map(g => {
      const halo = g.querySelector('[data-halo]'), red = g.querySelector('circle[data-point=at]');
      return {halo: halo && getComputedStyle(halo).stroke, haloWidth: halo && Number(halo.getAttribute('stroke-width')),
              ring: Number(g.querySelector('circle[fill=none]:not([data-halo])')?.getAttribute('stroke-width'))}; })""")
    assert len(halo) == 2, halo
    for h in halo:
        assert h["halo"] == "rgb(255, 255, 255)" and h["haloWidth"] > h["ring"], h
    assert axe_violations(page) == []
    shot(page, f"compare-{size['width']}")
