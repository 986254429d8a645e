"""Every long job leaves one job record, whoever starts it: a re-run, a ClawGUI import, a judge
back-fill and an export, each called as the command line calls them, end with one row in the
lake's `jobs` table holding the final status, progress, result and who ran it. A re-run's
status is its job's, not a field of `runs.metrics`; re-runs recorded before jobs were still
read theirs from there."""

from __future__ import annotations

import getpass
import json
import os
import socket
from datetime import UTC, datetime

import pytest

from episodelake.collectors.agents.judge import StepJudge
from episodelake.collectors.agents.model_client import ModelClient
from episodelake.collectors.agents.random import RandomPolicy
from episodelake.collectors.clawgui.importer import import_clawgui
from episodelake.collectors.jobs.backfill import backfill
from episodelake.collectors.jobs.rerun import RerunSpec, get_rerun, list_reruns, run_rerun
from episodelake.lake import Lake
from episodelake.lake.export import ExportSpec, run_export
from episodelake.lake.ops.jobs import list_jobs
from episodelake.lake.storage.errors import DeviceUnavailable, NotFound
from tests import factories
from tests.collectors.test_judge import QUICK, record, yes
from tests.collectors.test_rerun import record_set


def rows(lake: Lake, kind: str) -> list[dict]:
    lake.invalidate()
    return lake.sql("SELECT * FROM jobs WHERE kind = ?", [kind]).to_pylist()


def assert_finished_by_this_process(row: dict, total: int) -> None:
    assert row["status"] == "done" and row["error"] is None
    assert (row["done"], row["total"]) == (total, total)
    assert row["who"] == getpass.getuser() and row["host"] == socket.gethostname() and row["pid"] == os.getpid()
    assert row["created_at"] <= row["started_at"] <= row["finished_at"] <= datetime.now(UTC)


def test_a_rerun_leaves_one_job_and_runs_keeps_only_its_report(lake):
    record_set(lake, "failures", lambda d: RandomPolicy(3, terminate_p=0.3), episodes_per_task=1,
               only_failures=True)
    progress = []
    report = run_rerun(lake, RerunSpec(set="failures", policy="oracle", n=1),
                       lambda done, total: progress.append((done, total)))
    [row] = rows(lake, "rerun")
    assert row["job_id"] == report["rerun_id"]
    assert_finished_by_this_process(row, progress[-1][1])
    assert json.loads(row["params"])["policy"] == "oracle"
    assert json.loads(row["result"]) == {"before": 0.0, "after": 1.0, "delta": 1.0, "interval": report["interval"],
                                         "fixed": len(report["fixed"]), "broke": 0}
    metrics = json.loads(lake.sql("SELECT metrics FROM runs WHERE run_id = ?", [row["job_id"]]).column(0)[0].as_py())
    assert "status" not in metrics and "error" not in metrics and metrics["delta"] == 1.0
    [listed] = list_reruns(lake)
    assert listed["status"] == "finished" and listed["progress"] == {"done": row["done"], "total": row["total"]}
    assert get_rerun(lake, row["job_id"])["status"] == "finished"


def test_a_failing_rerun_records_its_error_on_its_job(lake):
    record_set(lake, "failures", lambda d: RandomPolicy(3, terminate_p=0.3), episodes_per_task=1)
    with pytest.raises(DeviceUnavailable) as raised:  # no environment server answers on port 9
        run_rerun(lake, RerunSpec(set="failures", policy="model", env="mobileworld", n=1,
                                  model_url="http://127.0.0.1:9/v1", model="m", servers=("http://127.0.0.1:9",)))
    [row] = rows(lake, "rerun")
    assert row["status"] == "failed" and row["finished_at"] is not None
    error = json.loads(row["error"])
    assert error == {"type": "DeviceUnavailable", "message": str(raised.value)}
    listed = list_reruns(lake)[0]
    assert listed["status"] == "failed" and listed["error"] == error


def test_a_refused_rerun_leaves_no_job(lake):
    with pytest.raises(NotFound):
        run_rerun(lake, RerunSpec(set="nope", policy="oracle"))
    assert rows(lake, "rerun") == []


def test_reruns_recorded_before_jobs_show_the_status_kept_in_their_metrics(lake):
    now = datetime.now(UTC)
    config = json.dumps({"policy": "oracle", "env": "sim", "n": 1})
    lake.upsert("runs", [
        {"run_id": "rerun-old-done", "iteration": 0, "kind": "rerun", "config": config, "created_at": now,
         "metrics": json.dumps({"status": "finished", "set": {"name": "s"}, "delta": 0.5, "fixed": ["a"]})},
        {"run_id": "rerun-old-bad", "iteration": 0, "kind": "rerun", "config": config, "created_at": now,
         "metrics": json.dumps({"status": "failed", "set": {"name": "s"}, "error": "DeviceUnavailable: gone"})},
    ])
    listed = {r["rerun_id"]: r for r in list_reruns(lake)}
    assert listed["rerun-old-done"]["status"] == "finished" and listed["rerun-old-done"]["delta"] == 0.5
    assert listed["rerun-old-bad"]["status"] == "failed"
    assert listed["rerun-old-bad"]["error"] == {"type": "DeviceUnavailable", "message": "gone"}
    assert get_rerun(lake, "rerun-old-bad")["error"]["type"] == "DeviceUnavailable"


def test_an_import_leaves_one_job_with_its_counts(lake, tmp_path):
    root = tmp_path / "clawgui"
    for i in range(3):
        factories.write_reference_episode(root, "wifi_on", f"ep-{i}", 2)
    (root / "wifi_on" / "broken").mkdir()
    (root / "wifi_on" / "broken" / "episode.json").write_text("{not json")
    report = import_clawgui(lake, root, progress=False)
    [row] = rows(lake, "import")
    assert_finished_by_this_process(row, 3)
    assert json.loads(row["params"])["dir"] == str(root.resolve())
    assert json.loads(row["result"]) == {"episodes": 3, "steps": 6, "skipped": len(report.skipped),
                                         "missing_images": 0, "ungrouped": 0}


def test_a_judge_backfill_leaves_one_job(lake, fake_model):
    ids = record(lake, 2, 2)
    fake_model.script(yes(), yes())
    judge = StepJudge(ModelClient(fake_model.url, "judge", options=QUICK), attempts=1)
    backfill(lake, judge, ids, progress=False)
    [row] = rows(lake, "judge")
    assert_finished_by_this_process(row, 2)
    assert json.loads(row["params"]) == {"episodes": 2, "redo": False, "model": "judge"}
    assert json.loads(row["result"]) == {"episodes": 2, "judged": 2, "invalid": 0}


def test_an_export_leaves_one_job_under_its_id(lake, tmp_path):
    record(lake, 2, 2)
    result = run_export(lake, ExportSpec(format="llamafactory", out=tmp_path / "out", val_fraction=0.0))
    [row] = rows(lake, "export")
    assert row["job_id"] == result.export_id
    assert_finished_by_this_process(row, 2)
    assert json.loads(row["result"])["samples"] == result.samples
    assert [j["kind"] for j in list_jobs(lake)] == ["export"]
