"""The web app's job pages in headless Chromium: start an export from the form and see it
finish with a download link; re-run a set of simulated-phone episodes and read its report;
a training run's curves."""

from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts, task_ids
from episodelake.lake.ops.lineage import record
from tests.browser.conftest import axe_violations, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUN = "train-browser-1"


def test_start_an_export_and_download_it(page):
    page.goto(page.base + "/exports")
    form = page.get_by_test_id("export-form")
    form.get_by_label("format").select_option("swift")
    form.get_by_label("val_fraction").fill("0")
    form.get_by_role("button", name="Start export").click()
    row = page.get_by_test_id("exports").locator("tbody tr").first
    row.locator('[data-testid=job-state][data-status="finished"]').wait_for(timeout=60_000)
    assert "swift" in row.inner_text() and "train + 0 val" in row.inner_text()
    link = row.get_by_test_id("download")
    href = link.get_attribute("href")
    assert re.fullmatch(r"/api/exports/exp-[0-9a-f]{12}/download", href)
    shot(page, "exports-finished")
    archive = zipfile.ZipFile(io.BytesIO(httpx.get(page.base + href, timeout=60).content))
    assert any(n.endswith("/manifest.json") for n in archive.namelist())

    # bad input is shown, not swallowed
    form.get_by_label("where").fill("task_name = 'no-such-task'")
    form.get_by_role("button", name="Start export").click()
    page.get_by_test_id("export-error").get_by_text("EmptySelection").wait_for()

    # a teammate's export shows in the list without a reload, and follows its job to the end
    rows = page.get_by_test_id("exports").locator("tbody tr")
    started = httpx.post(page.base + "/api/exports", json={"format": "trl", "val_fraction": 0.0})
    assert started.status_code == 202, started.text
    theirs = rows.filter(has_text=started.json()["export_id"])
    theirs.locator('[data-testid=job-state][data-status="finished"]').wait_for(timeout=60_000)
    # once, and beside the export started from the form (counting all rows raced the list's
    # own refresh under load: it read 2 before and 2 after while the new row was on screen)
    assert theirs.count() == 1
    assert rows.filter(has_text="swift").count() >= 1


def test_rerun_a_set_and_read_the_report(page, web_lake):
    run_rollouts(web_lake, RolloutSpec(task_ids(3, seed=1), group_size=2, max_steps=8, run_id="sim-run"),
                 demo_agent("demo"), progress=False)
    episodes = web_lake.sql("SELECT episode_id FROM episodes WHERE run_id = 'sim-run'").to_pylist()
    sid = httpx.post(page.base + "/api/sets", json={"name": "sim-benchmark", "kind": "regression"}).json()["set_id"]
    for e in episodes:
        httpx.put(f"{page.base}/api/sets/{sid}/members/{e['episode_id']}", json={})
    page.goto(page.base + "/reruns")
    form = page.get_by_test_id("rerun-form")
    form.get_by_label("set").select_option(sid)
    assert form.get_by_label("policy").input_value() == ""  # no policy is chosen for the user
    form.get_by_role("button", name=re.compile("Re-run")).click()
    assert page.url.endswith("/reruns")  # the form asks for one first
    form.get_by_label("policy").select_option("oracle")
    form.get_by_label("n", exact=True).fill("1")
    form.get_by_role("button", name=re.compile("Re-run")).click()
    page.wait_for_url(re.compile(r"/reruns/rerun-[0-9a-f]{12}$"))
    numbers = page.get_by_test_id("rerun-numbers")
    numbers.wait_for(timeout=60_000)
    text = numbers.inner_text()
    assert "3/3 re-run episodes (100%)" in text and "(1 per task)" in text and "points" in text
    assert "of the set's recorded episodes" in text  # before and after say what each counts
    tasks = page.get_by_test_id("rerun-tasks").locator("tbody tr")
    assert tasks.count() == 3
    assert page.locator('[data-testid=rerun-tasks] tr[data-status="broke"]').count() == 0
    shot(page, "rerun-report")
    page.get_by_role("link", name="← all re-runs").click()
    row = page.get_by_test_id("reruns").locator("tbody tr").first
    row.get_by_text("sim-benchmark").wait_for()
    # the list shows the job finished, not the "running" it held when the job started
    row.locator('[data-testid=job-state][data-status="finished"]').wait_for(timeout=10_000)
    assert "100%" in row.inner_text() and "oracle" in row.inner_text()


CURVE = """(testid) => { const u = document.querySelector(`[data-testid=${testid}]`).plot;
  return Object.fromEntries(u.series.slice(1).map((s, i) => [s.label, u.data[i + 1].map(v => Math.round(v * 100) / 100)])); }"""


def test_a_training_run_shows_its_curves(page, web_lake):
    start = datetime(2026, 4, 1, tzinfo=UTC)
    web_lake.upsert("runs", [
        {"run_id": RUN, "iteration": i, "kind": "train", "config": json.dumps({"algo": "gigpo"}),
         "metrics": json.dumps({"success_rate": rate, "eval_success_rate": rate - 0.1,
                                "update": {"loss": loss}, "seconds": {"rollout": 3.0, "update": 1.0}}),
         "created_at": start + timedelta(minutes=i)}
        for i, (rate, loss) in enumerate([(0.2, 1.1), (0.45, 0.7), (0.7, 0.4)])])
    page.goto(page.base + "/training")
    page.get_by_test_id("runs").get_by_role("link", name=RUN).click()
    page.wait_for_url(re.compile(f"/training/{RUN}$"))
    success = page.get_by_test_id("success-curve")
    success.wait_for()
    # each curve draws its series' three iterations (the uPlot instance behind the chart)
    page.wait_for_function("() => document.querySelector('[data-testid=loss-curve]')?.plot")
    assert page.evaluate(CURVE, "success-curve") == {"success_rate": [0.2, 0.45, 0.7], "eval_success_rate": [0.1, 0.35, 0.6]}
    assert page.evaluate(CURVE, "loss-curve") == {"update.loss": [1.1, 0.7, 0.4]}
    # a run still training: its next iteration is drawn without a reload
    page.evaluate("window.__stayed = true")
    web_lake.upsert("runs", [{"run_id": RUN, "iteration": 3, "kind": "train", "config": json.dumps({"algo": "gigpo"}),
                              "metrics": json.dumps({"success_rate": 0.8, "eval_success_rate": 0.7, "update": {"loss": 0.3}}),
                              "created_at": start + timedelta(minutes=3)}])
    page.wait_for_function("() => document.querySelector('[data-testid=success-curve]')?.plot?.data[1].length === 4",
                           timeout=10_000)
    assert page.evaluate(CURVE, "success-curve") == {"success_rate": [0.2, 0.45, 0.7, 0.8], "eval_success_rate": [0.1, 0.35, 0.6, 0.7]}
    assert page.evaluate("window.__stayed") is True
    page.get_by_label("metric").select_option("seconds.rollout")
    page.get_by_test_id("other-curve").wait_for()
    shot(page, "training-run")
    # the episodes its checkpoints trained on: the episode list under the run's lineage
    trained = web_lake.sql("SELECT episode_id FROM episodes ORDER BY episode_id LIMIT 3").column(0).to_pylist()
    record(web_lake, "train", f"checkpoints/{RUN}/iter-2", run_id=RUN, episode_ids=trained,
           lake_versions={}, selection={}, counts={"episodes": 3})
    page.get_by_test_id("run-episodes").click()
    page.wait_for_url(re.compile(r"/\?where=episode_id"))
    condition = page.evaluate("() => new URLSearchParams(location.search).get('where')")
    listed = httpx.get(page.base + "/api/episodes", params={"where": condition, "limit": 100}).json()["items"]
    assert sorted(e["episode_id"] for e in listed) == trained


BANDS = """(testid) => { const u = document.querySelector(`[data-testid=${testid}]`).plot;
  return {bands: u.bands.length, labels: u.series.slice(1).map(s => s.label),
          data: u.data.slice(1).map(d => d.map(v => v == null ? null : Math.round(v * 1000) / 1000))}; }"""


def test_runs_over_seeds_show_each_arm_with_its_interval(page, web_lake):
    start = datetime(2026, 4, 2, tzinfo=UTC)
    curves = {("gigpo", 0): [0.2, 0.6], ("gigpo", 1): [0.4, 0.8], ("grpo", 0): [0.1, 0.5], ("grpo", 1): [0.3, 0.5]}
    web_lake.upsert("runs", [
        {"run_id": f"seeds-{algo}-{seed}", "iteration": i, "kind": "train",
         "config": json.dumps({"advantages": {"algo": algo}, "seed": seed, "lr": 0.003}),
         "metrics": json.dumps({"eval_success_rate": value, "success_rate": value,
                                "credit": {"within_state": 0.9 if algo == "gigpo" else 0.6}}),
         "created_at": start + timedelta(minutes=i)}
        for (algo, seed), curve in curves.items() for i, value in enumerate(curve)])
    page.goto(page.base + "/training")
    section = page.get_by_test_id("over-seeds")
    section.wait_for()
    page.wait_for_function("() => document.querySelector('[data-testid=seeds-curve]')?.plot")
    drawn = page.evaluate(BANDS, "seeds-curve")
    # two arms over seeds 0 and 1 (the single-seed run of the other test is its own arm)
    # (labelled by what tells the arms apart: `lr` too while that run's arm is there)
    arms = [label for label in drawn["labels"] if label.endswith("(2 seeds)")]
    assert [a.split()[0] for a in arms] == ["algo=gigpo", "algo=grpo"]
    gigpo = drawn["labels"].index(arms[0])
    assert drawn["data"][gigpo][:2] == [0.3, 0.7]  # the means per iteration (another run may add a third)
    assert drawn["bands"] >= 2  # each arm with an interval is shaded between its edges
    half = round(12.706 * 0.1414 / 2 ** 0.5, 2)  # t(1) * sd / sqrt(2) of (0.2, 0.4)
    # a rate's interval is cut to 0-100% in the chart as in the table (0.3 +- 1.27 is [0, 1])
    assert half > 0.7
    edges = [d for d in drawn["data"] if d and d[0] is not None and d[0] in (0.0, 1.0)]
    assert len(edges) >= 2, drawn["data"]
    assert all(v is None or -1e-9 <= v <= 1 + 1e-9 for d in drawn["data"] for v in d), drawn["data"]
    table = page.get_by_test_id("arms")
    row = table.locator("tr", has_text="algo=grpo")
    assert "0, 1" in row.inner_text() and "35.0%" in row.inner_text()  # runs end at means 0.3 and 0.4
    page.get_by_label("metric over seeds").select_option("success_rate")
    row.get_by_role("link", name="seeds-grpo-1").wait_for()
    page.get_by_label("metric over seeds").select_option("credit.within_state")  # a nested key
    row.get_by_text("0.600").wait_for()
    assert axe_violations(page) == []
    shot(page, "training-over-seeds")


@pytest.mark.parametrize("url, testid, text", [
    ("/reruns", "reruns-page", "^Re-runs$"),
    ("/reruns/rerun-000000000000", "rerun-page", "no re-run"),
    ("/training/no-such-run", "run-page", "no run"),
])
def test_job_pages_open_from_their_url(page, url, testid, text):
    page.goto(page.base + url)
    page.get_by_test_id(testid).get_by_text(re.compile(text)).first.wait_for()


def test_a_failure_set_exports_its_failures_with_the_default_settings(page, web_lake):
    failed = web_lake.sql("SELECT episode_id FROM episodes WHERE NOT coalesce(success, false) "
                          "ORDER BY episode_id LIMIT 2").to_pylist()
    assert failed, "the test lake holds failed episodes"
    sid = httpx.post(page.base + "/api/sets", json={"name": "failures-to-export", "kind": "failure"}).json()["set_id"]
    for e in failed:
        httpx.put(f"{page.base}/api/sets/{sid}/members/{e['episode_id']}", json={})
    page.goto(page.base + "/exports")
    form = page.get_by_test_id("export-form")
    form.get_by_label("format").select_option("swift")
    form.get_by_label("set").select_option(sid)
    box = form.locator("input[name=include_failed]")
    assert box.is_checked()  # chosen for the user: a failure set is exported with its failures
    form.get_by_role("button", name="Start export").click()
    row = page.locator("[data-testid=exports] tbody tr:has-text('failures-to-export')").first
    row.locator('[data-testid=job-state][data-status="finished"]').wait_for(timeout=60_000)
    assert not page.get_by_test_id("export-error").get_by_text("EmptySelection").is_visible()
    # the export's lineage: its episodes are one click away, as the episode list under a
    # condition over the lineage table
    row.get_by_test_id("export-episodes").click()
    page.wait_for_url(re.compile(r"/\?where=episode_id"))
    page.get_by_test_id("task-tree").wait_for()
    condition = page.evaluate("() => new URLSearchParams(location.search).get('where')")
    listed = httpx.get(page.base + "/api/episodes", params={"where": condition, "limit": 100}).json()["items"]
    assert sorted(e["episode_id"] for e in listed) == sorted(e["episode_id"] for e in failed)
    page.goto(page.base + "/exports")
    form = page.get_by_test_id("export-form")
    # the whole lake again: the box follows the set chosen, not a stale choice
    form.get_by_label("set").select_option("")
    form.get_by_label("set").select_option(sid)
    assert box.is_checked()


def test_any_runs_overlay_with_smoothing_and_their_setting_differences(page, web_lake):
    start = datetime(2026, 5, 1, tzinfo=UTC)
    runs = {"overlay-gigpo": ("gigpo", [0.0, 0.6, 0.0, 0.6]), "overlay-grpo": ("grpo", [0.2, 0.2, 0.4])}
    for run_id, (algo, rates) in runs.items():
        web_lake.upsert("runs", [
            {"run_id": run_id, "iteration": i, "kind": "train",
             "config": json.dumps({"algo": algo, "seed": 3, "lr": 0.001}),
             "metrics": json.dumps({"eval_success_rate": rate}), "created_at": start + timedelta(minutes=i)}
            for i, rate in enumerate(rates)])
    page.goto(page.base + "/training")
    table = page.get_by_test_id("runs")
    row = table.locator("tr", has=page.get_by_role("link", name="overlay-grpo"))
    assert "grpo" in row.inner_text() and "3" in row.inner_text()  # algo, policy, seed columns
    page.get_by_label("overlay overlay-gigpo").check()
    page.wait_for_url(re.compile(r"overlay=overlay-gigpo$"))
    page.get_by_label("overlay overlay-grpo").check()
    page.wait_for_url(re.compile(r"overlay=overlay-gigpo,overlay-grpo$"))
    page.wait_for_function("() => document.querySelector('[data-testid=overlay-curve]')?.plot?.series.length === 3")
    assert page.evaluate(CURVE, "overlay-curve")["overlay-gigpo"] == [0.0, 0.6, 0.0, 0.6]
    # the shorter run stops where it stopped: a gap, not a zero
    grpo = page.evaluate("() => document.querySelector('[data-testid=overlay-curve]').plot.data[2]")
    assert grpo == [0.2, 0.2, 0.4, None]
    page.get_by_label("smoothing window").select_option("3")
    page.wait_for_function("() => Math.abs(document.querySelector('[data-testid=overlay-curve]').plot.data[1][1] - 0.3) < 1e-9")
    assert page.evaluate(CURVE, "overlay-curve")["overlay-gigpo"] == [0.0, 0.3, 0.2, 0.4]
    diff = page.get_by_test_id("config-diff")
    assert [r.inner_text().split("\t")[0] for r in diff.locator("tbody tr").all()] == ["algo"]  # seed, lr equal
    shot(page, "training-overlay")
    assert axe_violations(page) == []
    page.reload()  # the overlay is in the address
    page.get_by_test_id("overlay-curve").wait_for()
