"""Daily use of the web app, as a person curating episodes meets it: shortcuts that keep
working, curation that files where the user said, confirmations, feedback in view, unsaved
notes kept, readable labels and times, errors in the user's words, charts that tell 40
series apart, a SQL grid for thousands of rows, a narrow window, Compare's keys, thumbnails
and zoom."""

from __future__ import annotations

import csv
import io
import re
from urllib.parse import quote

import httpx
import pyarrow.parquet as pq
import pytest

from episodelake.api.settings import Settings, default_static_dir
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.vocab.families import format_tool_call
from tests.api.webapp_support import ServerThread, screen
from tests.browser.conftest import readme_shot, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG_TASK = "open_settings_then_network_then_wifi_then_turn_it_on_and_check_it_stays_on"


def screen_at(page, step: int) -> None:
    page.wait_for_selector(f'[data-testid=screen][data-loaded-step="{step}"]')


def memberships(page, episode_id: str) -> list[tuple]:
    stored = httpx.get(f"{page.base}/api/episodes/{episode_id}").json()["memberships"]
    return [(m["set_name"], m["failure_category"], m["failing_step"]) for m in stored]


def new_set(page, name: str) -> str:
    r = httpx.post(page.base + "/api/sets", json={"name": name, "kind": "failure"})
    assert r.status_code == 201, r.text
    return r.json()["set_id"]


def open_replay(page, episode_id: str, step: int = 0, *, target_set: str | None = None) -> None:
    """The replay at `step`, with `target_set` as the remembered curation set (or none)."""
    page.goto(page.base + "/sets")
    page.evaluate("(id) => { localStorage.clear(); if (id) localStorage.setItem('elake.curation.set', id); }", target_set)
    page.goto(f"{page.base}/episodes/{episode_id}/steps/{step}")
    screen_at(page, step)
    ready = "Filing into" if target_set else "No set chosen"
    page.get_by_test_id("curation-target").get_by_text(re.compile(ready)).wait_for()  # the sets have loaded


def in_view(page, locator) -> bool:
    """The element is inside the viewport and on top at its centre (not scrolled away)."""
    box = locator.bounding_box()
    size = page.viewport_size
    if box is None or box["y"] < 0 or box["y"] + box["height"] > size["height"] or box["x"] + box["width"] > size["width"]:
        return False
    return locator.evaluate("(el, [x, y]) => el.contains(document.elementFromPoint(x, y))",
                            [box["x"] + box["width"] / 2, box["y"] + box["height"] / 2])


# 1 ---------------------------------------------------------------------------------------
def test_keys_keep_working_after_a_checkbox_and_escape_leaves_a_text_box(page):
    open_replay(page, "wifi_on-2")
    page.get_by_test_id("overlay-toggle").click()  # a checkbox takes focus, not the keys
    assert page.locator("[data-testid=overlay]").count() == 0
    page.keyboard.press("d")
    screen_at(page, 1)
    page.keyboard.press("ArrowRight")
    screen_at(page, 2)
    page.keyboard.press("o")
    assert page.locator("[data-testid=overlay]").count() == 1
    page.get_by_test_id("note").click()
    page.keyboard.press("Escape")  # back to the replay
    page.keyboard.press("a")
    screen_at(page, 1)
    assert page.get_by_test_id("note").input_value() == ""


# 2 ---------------------------------------------------------------------------------------
def test_a_category_key_keeps_the_failing_step_already_marked(page):
    sid = new_set(page, "keeps-step")
    open_replay(page, "set_alarm-2", 4, target_set=sid)
    page.keyboard.press("f")  # F marks step 4 as the failing one
    page.keyboard.press("4")  # at once: the category joins the step, it does not undo it
    page.get_by_test_id("memberships").get_by_text("environment").wait_for()
    page.get_by_test_id("memberships").get_by_text("failing step 4").wait_for()
    page.keyboard.press("a")
    page.keyboard.press("a")
    page.keyboard.press("a")
    screen_at(page, 1)
    page.keyboard.press("1")  # the category changes; the failing step stays 4
    page.get_by_test_id("memberships").get_by_text("grounding").wait_for()
    assert memberships(page, "set_alarm-2") == [("keeps-step", "grounding", 4)]
    assert "failing step 4" in page.get_by_test_id("memberships").inner_text()


# 3 ---------------------------------------------------------------------------------------
def test_category_keys_ask_for_the_set_when_none_is_chosen(page):
    sid = new_set(page, "made-by-another-client")
    open_replay(page, "set_alarm-0")
    target = page.get_by_test_id("curation-target")
    page.keyboard.press("2")
    page.get_by_test_id("toast").get_by_text(re.compile("choose a set", re.I)).wait_for()
    assert memberships(page, "set_alarm-0") == []  # nothing filed into a set nobody chose
    # the picker is shown, not focused: a next letter must not choose a set by type-ahead
    assert page.evaluate("document.activeElement.dataset.testid") != "set-select"
    page.keyboard.press("m")
    page.keyboard.press("2")
    assert page.get_by_test_id("set-select").input_value() == ""
    assert memberships(page, "set_alarm-0") == []
    page.get_by_test_id("set-select").select_option(sid)
    target.get_by_text("made-by-another-client").wait_for()
    page.keyboard.press("Escape")
    page.keyboard.press("2")
    page.get_by_test_id("memberships").get_by_text("planning").wait_for()
    assert memberships(page, "set_alarm-0") == [("made-by-another-client", "planning", None)]
    page.reload()  # remembered for this user
    screen_at(page, 0)
    page.get_by_test_id("curation-target").get_by_text("made-by-another-client").wait_for()


def test_a_deleted_remembered_set_is_said_not_left_blank(page):
    sid = new_set(page, "soon-gone")
    before = memberships(page, "set_alarm-0")  # other tests of this module may have filed it
    assert httpx.delete(f"{page.base}/api/sets/{sid}").status_code == 204
    page.goto(page.base + "/sets")
    page.evaluate("(id) => { localStorage.clear(); localStorage.setItem('elake.curation.set', id); }", sid)
    page.goto(f"{page.base}/episodes/set_alarm-0/steps/0")
    screen_at(page, 0)
    gone = page.get_by_test_id("remembered-set-gone")
    gone.wait_for()
    assert "no longer exists" in gone.inner_text()
    page.keyboard.press("2")  # still nothing filed anywhere
    page.get_by_test_id("toast").get_by_text(re.compile("choose a set", re.I)).wait_for()
    assert memberships(page, "set_alarm-0") == before


# 4 ---------------------------------------------------------------------------------------
def test_deleting_a_set_asks_first(page):
    sid = new_set(page, "to-delete")
    page.goto(f"{page.base}/sets/{sid}")
    page.get_by_role("button", name="Delete set").click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    assert "to-delete" in dialog.inner_text()
    assert httpx.get(f"{page.base}/api/sets/{sid}").status_code == 200  # not yet
    dialog.get_by_role("button", name="Cancel").click()
    assert page.get_by_role("dialog").count() == 0
    assert httpx.get(f"{page.base}/api/sets/{sid}").status_code == 200
    page.get_by_role("button", name="Delete set").click()
    shot(page, "delete-set-confirm")
    page.get_by_role("dialog").get_by_role("button", name="Delete", exact=True).click()
    page.wait_for_url(re.compile(r"/sets$"))
    assert httpx.get(f"{page.base}/api/sets/{sid}").status_code == 404


# 5 ---------------------------------------------------------------------------------------
def test_save_feedback_and_errors_show_where_the_user_looks(page):
    page.set_viewport_size({"width": 1440, "height": 900})
    sid = new_set(page, "feedback")
    open_replay(page, "send_message-0", 2, target_set=sid)
    page.keyboard.press("3")
    saved = page.get_by_test_id("toast").get_by_text(re.compile("Saved in feedback"))
    saved.wait_for()
    assert in_view(page, saved)
    httpx.delete(f"{page.base}/api/sets/{sid}")  # another client deletes the set meanwhile
    page.keyboard.press("f")
    failed = page.get_by_test_id("toast").get_by_role("alert").filter(has_text="feedback")
    failed.wait_for()
    assert in_view(page, failed)
    shot(page, "toast-error")


# 6 ---------------------------------------------------------------------------------------
def test_unsaved_note_warns_before_leaving(page):
    open_replay(page, "wifi_on-2")
    page.get_by_test_id("note").fill("half-written thought")
    page.locator('[data-episode="wifi_on-0"]').click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text(re.compile("unsaved", re.I)).wait_for()
    assert page.url.endswith("/episodes/wifi_on-2/steps/0")
    dialog.get_by_role("button", name="Stay").click()
    assert page.get_by_test_id("note").input_value() == "half-written thought"
    # closing or reloading the tab asks the browser to warn
    prevented = page.evaluate("() => { const e = new Event('beforeunload', {cancelable: true});"
                              " window.dispatchEvent(e); return e.defaultPrevented; }")
    assert prevented
    page.locator('[data-episode="wifi_on-0"]').click()
    page.get_by_role("dialog").get_by_role("button", name=re.compile("Leave")).click()
    page.wait_for_url(re.compile(r"/episodes/wifi_on-0/steps/0$"))
    prevented = page.evaluate("() => { const e = new Event('beforeunload', {cancelable: true});"
                              " window.dispatchEvent(e); return e.defaultPrevented; }")
    assert not prevented


def test_unsaved_note_warns_before_back_and_forward(page):
    open_replay(page, "wifi_on-2")
    page.locator('[data-episode="wifi_on-0"]').click()
    page.wait_for_url(re.compile(r"/episodes/wifi_on-0/steps/0$"))
    screen_at(page, 0)
    page.get_by_test_id("note").fill("second thoughts")
    page.go_back()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text(re.compile("unsaved", re.I)).wait_for()
    assert page.url.endswith("/episodes/wifi_on-0/steps/0")
    dialog.get_by_role("button", name="Stay").click()
    assert page.get_by_test_id("note").input_value() == "second thoughts"
    page.go_back()
    page.get_by_role("dialog").get_by_role("button", name=re.compile("Leave")).click()
    page.wait_for_url(re.compile(r"/episodes/wifi_on-2/steps/0$"))
    screen_at(page, 0)
    page.go_forward()  # nothing unsaved here: no question
    page.wait_for_url(re.compile(r"/episodes/wifi_on-0/steps/0$"))
    screen_at(page, 0)
    assert page.get_by_role("dialog").count() == 0


# 7 ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def long_task(web_lake):
    with Recorder(web_lake, run_id="run-2") as rec:
        ep = rec.start_episode(LONG_TASK, "Make sure Wi-Fi is on", episode_id="long-0", policy_version="ckpt-20")
        ep.log_step(screen(0, 0), format_tool_call({"action": "terminate", "status": "success"}))
        ep.finish(success=True)
    return LONG_TASK


def test_task_names_labels_and_times_read_as_words(page, long_task):
    page.goto(page.base + "/")
    row = page.get_by_test_id("task-tree").locator(".task-row", has_text="open_settings")
    name = row.locator(".task-name")
    name.wait_for()
    assert name.inner_text().replace("\n", "") == long_task
    assert name.evaluate("el => el.scrollWidth <= el.clientWidth && el.scrollHeight <= el.clientHeight + 1")
    assert long_task in (row.get_attribute("title") or "")
    row.click()
    link = page.locator('[data-episode="long-0"]')
    assert "1 step" in link.inner_text() and "1 steps" not in link.inner_text()
    assert "ckpt-20" in link.inner_text() and "vckpt" not in link.inner_text()
    link.click()
    screen_at(page, 0)
    time_cell = page.get_by_test_id("step-panel").locator("time")
    assert not re.search(r"\d{4}-\d\d-\d\dT|\.\d{6}", time_cell.inner_text())
    assert re.match(r"\d{4}-\d\d-\d\dT", time_cell.get_attribute("datetime"))
    new_set(page, "times")
    page.goto(page.base + "/sets")
    updated = page.get_by_test_id("sets-page").locator("tbody tr", has_text="times").locator("time")
    assert not re.search(r"T\d\d:|\.\d{6}", updated.inner_text())


def test_errors_name_what_the_user_did(page):
    page.goto(page.base + "/sql?q=select%20nope%20from%20episodes")
    alert = page.get_by_test_id("sql-page").get_by_role("alert")
    alert.wait_for()
    assert "nope" in alert.inner_text() and "Could not load" not in alert.inner_text()
    assert alert.get_by_role("button", name="Retry").count() == 0  # the same query would fail again
    # said once: no "SqlRefused:" type and no second "query failed:" after "The query failed:"
    assert alert.inner_text().count("failed") == 1 and "SqlRefused" not in alert.inner_text()
    tables = page.get_by_test_id("sql-tables")
    tables.locator("summary", has_text="saved_views").wait_for()
    assert "jobs" in tables.inner_text()

    page.goto(page.base + "/?where=" + quote("episode_reward >"))
    alert = page.get_by_test_id("task-tree").get_by_role("alert")
    alert.wait_for()
    assert "episode_reward >" in alert.inner_text() and '")"' not in alert.inner_text()
    assert alert.get_by_role("button", name="Retry").count() == 0

    page.goto(page.base + "/exports")
    form = page.get_by_test_id("export-form")
    form.get_by_label("format").select_option("swift")
    form.get_by_label("where").fill("success = false")
    form.get_by_role("button", name="Start export").click()
    error = page.get_by_test_id("export-error")
    error.get_by_text(re.compile("keep failed episodes")).wait_for()
    assert "--include-failed" not in error.inner_text()


# 8 ---------------------------------------------------------------------------------------
CHART_STATE = """([labels]) => {
  // the uPlot instance behind the chart: its series styles, its plot box, its x positions
  const u = document.querySelector('[data-testid=success-chart]').plot;
  const styles = u.series.slice(1).map((s, i) => s.stroke(u, i + 1) + '|' + (s.dash || []).join(' '));
  // the x labels as drawn: 11 px text turned 35 degrees, ending at their tick
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = '11px system-ui, sans-serif';
  const turn = 35 * Math.PI / 180;
  const plotLeft = u.bbox.left / devicePixelRatio, plotBottom = (u.bbox.top + u.bbox.height) / devicePixelRatio;
  const ends = labels.map((l, i) => {
    const w = ctx.measureText(l).width, x = plotLeft + u.valToPos(i, 'x');
    return {left: x - w * Math.cos(turn) - 11 * Math.sin(turn), bottom: plotBottom + w * Math.sin(turn) + 11 * Math.cos(turn)};
  });
  return {inside: ends.every(e => e.left >= 0 && e.bottom <= u.height),
          series: styles.length, distinct: new Set(styles).size};
}"""

FOCUS = """(name) => { const u = document.querySelector('[data-testid=success-chart]').plot;
  return u.series.slice(1).filter(s => s.label === name ? s.alpha === 1 : s.alpha < 0.5).length; }"""


def test_stats_chart_labels_fit_and_40_series_are_told_apart(browser, tmp_path):
    versions = ["checkpoint-000010", "checkpoint-000020", "checkpoint-000030"]
    with Recorder(tmp_path / "lake", run_id="run-1", image_checks="structure") as rec:
        for t in range(40):
            for v, version in enumerate(versions):
                ep = rec.start_episode(f"task_{t:02d}", "a task", episode_id=f"t{t}-{v}", policy_version=version)
                ep.log_step(screen(0, 0, size=(40, 80)), format_tool_call({"action": "terminate", "status": "success"}))
                ep.finish(success=(t + v) % 2 == 0)
    with ServerThread(Settings(lake=tmp_path / "lake", static_dir=default_static_dir())) as srv:
        page = browser.new_page()
        try:
            page.goto(srv.url + "/stats")
            page.get_by_test_id("success-chart").wait_for()
            page.wait_for_function("() => document.querySelector('[data-testid=success-chart]').plot")
            state = page.evaluate(CHART_STATE, [versions])
            assert state["inside"], state
            assert state["series"] == 40 and state["distinct"] == 40, state
            # pointing at a legend entry brings its line forward: the other 39 fade
            page.get_by_test_id("stats-page").locator(".legend").get_by_text("task_07", exact=True).hover()
            assert page.evaluate(FOCUS, "task_07") == 40
            shot(page, "stats-40-series")
        finally:
            page.close()


# 9 ---------------------------------------------------------------------------------------
WIDE = ("select range as i, case when range % 3 = 0 then null else repeat('word ', 12) end as text, "
        + ", ".join(f"'column value {k}' as c{k}" for k in range(10)) + " from range(2050)")


def test_sql_results_are_a_virtual_grid_with_downloads(page):
    page.set_viewport_size({"width": 1200, "height": 800})
    page.goto(page.base + "/sql?q=" + quote(WIDE))
    grid = page.get_by_test_id("sql-results")
    grid.get_by_text("column value 3").first.wait_for()
    assert "2050 rows" in page.get_by_test_id("sql-page").inner_text()
    rendered = grid.locator("[role=row]").count()
    assert 2 < rendered < 120, rendered  # only the rows in view (and a few more) are in the page
    heights = grid.locator("[role=row]").evaluate_all("rows => rows.slice(1, 5).map(r => r.getBoundingClientRect().height)")
    assert len(set(heights)) == 1, heights  # NULL and long text do not wrap
    scroller = page.get_by_test_id("sql-scroll")
    assert scroller.evaluate("el => el.scrollWidth > el.clientWidth")  # wide results scroll sideways
    widths = grid.locator("[role=columnheader]").evaluate_all("hs => hs.map(h => h.getBoundingClientRect().width)")
    assert min(widths) >= 60, widths
    scroller.evaluate("el => el.scrollTo(0, el.scrollHeight)")
    grid.locator("[role=row][aria-rowindex='2051']").wait_for()
    shot(page, "sql-grid")

    csv_link = page.get_by_role("link", name="Download CSV")
    rows = list(csv.reader(io.StringIO(httpx.get(page.base + csv_link.get_attribute("href")).text)))
    assert len(rows) == 2051 and rows[0][:3] == ["i", "text", "c0"]
    parquet = httpx.get(page.base + page.get_by_role("link", name="Download Parquet").get_attribute("href")).content
    assert pq.read_table(io.BytesIO(parquet)).num_rows == 2050


# 10 --------------------------------------------------------------------------------------
def test_the_replay_is_usable_at_800_pixels(page):
    page.set_viewport_size({"width": 800, "height": 900})
    open_replay(page, "wifi_on-1")
    centre = page.locator("main.centre").bounding_box()
    assert centre["width"] >= 600, centre
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    img = page.get_by_test_id("screen").locator("img").bounding_box()
    assert img["width"] >= 200 and img["x"] >= 0 and img["x"] + img["width"] <= 800
    page.keyboard.press("d")
    screen_at(page, 1)
    assert page.get_by_test_id("step-panel").is_visible()
    shot(page, "replay-800px")


# 11 --------------------------------------------------------------------------------------
def test_compare_keys_and_rows(page):
    page.goto(page.base + "/compare/wifi_on-1/wifi_on-2?step=0")
    page.get_by_test_id("compare-step").get_by_text("step 0 (1/6)").wait_for()
    page.keyboard.press("Shift+D")
    page.get_by_test_id("compare-step").get_by_text("step 1 (2/6)").wait_for()
    page.keyboard.press("Control+ArrowRight")  # the browser's, not a step
    page.wait_for_timeout(200)
    assert "step=1" in page.url
    page.keyboard.press("Shift+A")
    page.get_by_test_id("compare-step").get_by_text("step 0 (1/6)").wait_for()
    row = page.get_by_role("button", name="step 3", exact=True)
    row.focus()
    page.keyboard.press("Enter")
    page.get_by_test_id("compare-step").get_by_text("step 3 (4/6)").wait_for()
    assert "step=3" in page.url


# 13 --------------------------------------------------------------------------------------
def test_filmstrip_shows_thumbnails_and_the_screenshot_zooms(page):
    open_replay(page, "wifi_on-2")
    thumbs = page.get_by_test_id("filmstrip").locator("img")
    thumbs.first.wait_for()
    srcs = thumbs.evaluate_all("imgs => imgs.map(i => i.getAttribute('src'))")
    assert all("max_side=" in s for s in srcs), srcs
    r = httpx.get(page.base + srcs[0])
    assert r.headers["content-type"] == "image/jpeg" and len(r.content) < 20_000

    shown = page.get_by_test_id("screen").locator("img")
    before = shown.bounding_box()
    page.keyboard.press("z")
    page.wait_for_selector('[data-testid=screen][data-zoom="2"]')
    after = shown.bounding_box()
    assert after["height"] >= 1.9 * before["height"], (before, after)
    overlay = page.get_by_test_id("overlay").bounding_box()
    for k in ("x", "y", "width", "height"):
        assert abs(overlay[k] - after[k]) <= 1, (overlay, after)  # the action stays on its spot
    page.keyboard.press("d")  # stepping keeps the zoom
    screen_at(page, 1)
    assert page.get_by_test_id("screen").get_attribute("data-zoom") == "2"
    shot(page, "zoomed")
    shown.click()  # a click zooms back out
    page.wait_for_selector('[data-testid=screen][data-zoom="1"]')


def test_readme_screenshot_of_the_replay(page):
    """The README's picture of the replay, taken by the suite from the app as built."""
    page.set_viewport_size({"width": 1400, "height": 860})
    sid = new_set(page, "regressions to fix")
    open_replay(page, "wifi_on-1", 1, target_set=sid)
    page.keyboard.press("f")
    page.keyboard.press("2")
    page.get_by_test_id("memberships").get_by_text("planning").wait_for()
    page.get_by_test_id("memberships").get_by_text("failing step 1").wait_for()
    page.get_by_test_id("toast").get_by_text(re.compile("planning")).wait_for()
    dismiss = page.get_by_test_id("toast").get_by_role("button", name="dismiss")
    while dismiss.count():
        dismiss.first.click()
    page.get_by_test_id("overlay").wait_for()
    readme_shot(page, "replay")


def test_readme_pictures_are_rewritten_only_when_asked(page, monkeypatch, tmp_path):
    """An ordinary run leaves docs/screenshots/ alone; `just screenshots` (ELAKE_SCREENSHOTS=1)
    rewrites it."""
    monkeypatch.setitem(readme_shot.__globals__, "README_SHOTS", tmp_path / "docs")
    page.goto(page.base + "/")
    page.get_by_test_id("overview-policies").wait_for()
    monkeypatch.delenv("ELAKE_SCREENSHOTS", raising=False)
    assert readme_shot(page, "probe").parent.name == "test-artifacts"
    assert not (tmp_path / "docs").exists()
    monkeypatch.setenv("ELAKE_SCREENSHOTS", "1")
    assert readme_shot(page, "probe") == tmp_path / "docs" / "probe.png"
    assert (tmp_path / "docs" / "probe.png").read_bytes().startswith(b"\x89PNG")


def test_the_overview_greets_the_user_and_leads_on(page):
    """The landing view: success by policy version, latest runs, biggest failure categories,
    recent sets, each leading to what it counts. Also the README's picture of it."""
    sid = new_set(page, "overview failures")
    for episode in ("set_alarm-1", "send_message-1"):
        httpx.put(f"{page.base}/api/sets/{sid}/members/{episode}", json={"failure_category": "perception"})
    page.set_viewport_size({"width": 1400, "height": 860})
    page.goto(page.base + "/")
    policies = page.get_by_test_id("overview-policies")
    policies.locator("tbody tr").first.wait_for()
    assert page.title() == "Overview · EpisodeLake"
    rows = policies.locator("tbody tr").all_inner_texts()
    assert any(r.startswith("20") and "0%" in r for r in rows), rows  # build_lake: policy 20 always fails
    assert page.get_by_test_id("overview-runs").get_by_role("link", name="run-1").count() == 1
    top = page.get_by_test_id("overview-categories").locator("tbody tr").first.inner_text()
    assert top.startswith("perception"), top
    assert page.get_by_test_id("overview-sets").locator("tbody tr").first.get_by_role("link").inner_text() == "overview failures"
    readme_shot(page, "overview")
    policies.get_by_role("link", name="20", exact=True).click()
    page.wait_for_url(re.compile(r"/\?run_id=run-1&policy_version=20$"))  # policy 20 of its run
    page.get_by_test_id("task-tree").get_by_text("0✓").first.wait_for()  # the tree shows policy 20's episodes
    page.get_by_test_id("overview-sets").get_by_role("link", name="overview failures").click()
    page.wait_for_url(re.compile(f"/sets/{sid}$"))


def test_a_slow_query_shows_a_running_timer_and_can_be_cancelled(page):
    slow = "select sum(hash(a.range)) as s from range(3000000000) a"
    page.goto(page.base + "/sql?q=" + quote(slow))
    timer = page.get_by_test_id("sql-timer")
    timer.wait_for(timeout=10_000)
    page.wait_for_function("() => /running [1-9]/.test(document.querySelector('[data-testid=sql-timer]')?.textContent ?? '')",
                           timeout=10_000)  # it counts up while the query runs
    page.get_by_test_id("sql-cancel").click()
    page.get_by_test_id("sql-cancelled").wait_for(timeout=5_000)
    assert timer.count() == 0  # no longer running
    assert page.get_by_test_id("sql-page").get_by_role("alert").count() == 0  # a cancel is not an error
