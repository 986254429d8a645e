"""Jobs live in the lake: an export survives its server's SIGKILL as `interrupted`, a live
server's jobs are left alone, progress writes are throttled, exports can be deleted, and
/api/jobs lists every kind, started from the command line or the API."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from PIL import Image, ImageDraw

from episodelake.api.settings import Settings
from episodelake.collectors.agents.judge import StepJudge
from episodelake.collectors.agents.model_client import ModelClient
from episodelake.collectors.clawgui.importer import import_clawgui
from episodelake.collectors.jobs.backfill import backfill
from episodelake.collectors.jobs.rerun import RerunSpec, run_rerun
from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts, task_ids
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.curation import curation
from episodelake.lake.storage import schema, tables
from episodelake.lake.storage.lake import Lake
from episodelake.lake.vocab.families import format_tool_call
from tests import factories
from tests.api.webapp_support import ServerThread, error_of
from tests.lake.ops.test_jobs import start_runner
from tests.waiting import wait_job, wait_serving

EPISODES, STEPS = 100, 10
#: Every sample, every screenshot downscaled: seconds of work, so a test can act while it runs.
SLOW_EXPORT = {"format": "llamafactory", "dedup": False, "val_fraction": 0.0, "history_images": 3,
               "max_pixels": 64 * 64}


def shot(e: int, k: int) -> bytes:
    """A screenshot of its own for each step (exports write each distinct image once)."""
    img = Image.new("RGB", (180, 400), (e % 256, (7 * k) % 256, 90))
    ImageDraw.Draw(img).rectangle((e % 150, 10 * k, e % 150 + 30, 10 * k + 30), fill=(255, 255, 255))
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def build_big_lake(path: Path) -> Lake:
    """EPISODES x STEPS real steps, each with its own screenshot."""
    with Recorder(path, run_id="run-big", env="sim", image_checks="structure") as rec:
        for e in range(EPISODES):
            with rec.start_episode(f"task{e % 10}", "a goal", episode_id=f"ep-{e}") as ep:
                for k in range(STEPS):
                    ep.log_step(shot(e, k), format_tool_call({"action": "click", "coordinate": [100 + e, 200 + k]},
                                                             f"thinking {e} {k}"), reward=0.0)
                ep.finish(success=True)
    return Lake(path)


@pytest.fixture(scope="module")
def big_lake(tmp_path_factory) -> Lake:
    return build_big_lake(tmp_path_factory.mktemp("jobs") / "lake")


def stored_job(lake: Lake, job_id: str) -> dict:
    lake.invalidate()
    rows = lake.sql("SELECT * FROM jobs WHERE job_id = ?", [job_id]).to_pylist()
    return rows[0] if rows else {}


def test_a_hard_killed_servers_export_is_interrupted_at_the_next_start(big_lake):
    port = factories.free_port()
    proc = subprocess.Popen([sys.executable, "-m", "episodelake.api.cli", "--lake", str(big_lake.path),
                             "serve", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, timeout=60) as client:
            assert wait_serving(f"{url}/api/health", proc).status_code == 200
            r = client.post("/api/exports", json=SLOW_EXPORT)
            assert r.status_code == 202, r.text
            export_id = r.json()["export_id"]
            # a 202 means the job is recorded: kill the server while it writes
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = stored_job(big_lake, export_id)
    assert left["status"] == "running" and left["kind"] == "export" and left["owner"]
    assert big_lake.sql("SELECT status FROM exports WHERE export_id = ?", [export_id]).column(0)[0].as_py() == "running"

    with ServerThread(Settings(lake=big_lake.path, static_dir=None), big_lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=60) as client:
        job = client.get(f"/api/jobs/{export_id}").json()
        assert job["status"] == "interrupted" and job["error"]["type"] == "Interrupted"
        assert job["kind"] == "export" and job["params"]["format"] == "llamafactory"
        assert job["who"].startswith("api") and job["finished_at"] is not None
        export = client.get(f"/api/exports/{export_id}").json()
        assert export["status"] == "interrupted" and export["error"]["type"] == "Interrupted"
        listed = {e["export_id"]: e for e in client.get("/api/exports").json()}
        assert listed[export_id]["status"] == "interrupted"
        assert [j["job_id"] for j in client.get("/api/jobs", params={"status": "interrupted"}).json()] == [export_id]

        # what the dead server wrote can go
        folder = big_lake.path / "_exports" / export_id
        assert folder.is_dir()
        r = client.delete(f"/api/exports/{export_id}")
        assert r.status_code == 200 and r.json()["status"] == "deleted"
        assert not folder.exists()
        listed = {e["export_id"]: e for e in client.get("/api/exports").json()}
        assert listed[export_id]["status"] == "deleted"  # its record stays, listed as deleted


def test_a_second_server_leaves_a_live_servers_job_alone_and_progress_is_throttled(big_lake):
    settings = Settings(lake=big_lake.path, static_dir=None, job_progress_interval_s=3600)
    with ServerThread(settings, big_lake) as first, httpx.Client(base_url=first.url, timeout=60) as client:
        jobs = first.server.config.app.state.jobs
        release = threading.Event()

        def work(job):
            for i in range(501):
                job.progress(i, 500)
            release.wait(30)

        versions = len(big_lake.dataset("jobs").versions())
        assert jobs.start("import", "imp-live", work, wait_s=5, params={"dir": "x"}, who="test")["status"] == "running"
        with ServerThread(Settings(lake=big_lake.path, static_dir=None), Lake(big_lake.path)) as second, \
                httpx.Client(base_url=second.url, timeout=60) as other:
            job = other.get("/api/jobs/imp-live").json()
            assert job["status"] == "running" and job["progress"]["done"] == 0  # as recorded
        assert client.get("/api/jobs/imp-live").json()["progress"] == {"done": 500, "total": 500}  # live
        release.set()
        done = wait_job(client, "/api/jobs/imp-live", ("done", "failed", "interrupted"))
        assert done["status"] == "done" and done["params"] == {"dir": "x"} and done["who"] == "test"
    # one write when accepted, one at the end; none for the 500 progress ticks
    big_lake.invalidate()
    assert len(big_lake.dataset("jobs").versions()) - versions <= 3
    assert stored_job(big_lake, "imp-live")["status"] == "done"


def test_deleting_a_running_export_is_409_until_it_ends(big_lake):
    with ServerThread(Settings(lake=big_lake.path, static_dir=None), big_lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=60) as client:
        export_id = client.post("/api/exports", json=SLOW_EXPORT).json()["export_id"]
        r = client.delete(f"/api/exports/{export_id}")
        assert r.status_code == 409 and error_of(r)["type"] == "Conflict" and "running" in error_of(r)["message"]
        done = wait_job(client, f"/api/exports/{export_id}", ("finished", "failed", "interrupted"))
        assert done["status"] == "finished" and done["progress"] == {"done": EPISODES, "total": EPISODES}
        assert client.get(f"/api/jobs/{export_id}").json()["status"] == "done"
        assert client.delete(f"/api/exports/{export_id}").status_code == 200
        assert not (big_lake.path / "_exports" / export_id).exists()


def test_deleting_a_finished_export_removes_its_files(server, lake):
    with httpx.Client(base_url=server.url, timeout=60) as client:
        r = client.post("/api/exports", json={"format": "llamafactory", "val_fraction": 0.0})
        export_id = r.json()["export_id"]
        done = wait_job(client, f"/api/exports/{export_id}", ("finished", "failed"))
        assert done["status"] == "finished", done
        folder = lake.path / "_exports" / export_id
        assert any(folder.rglob("*.png"))
        r = client.delete(f"/api/exports/{export_id}")
        assert r.status_code == 200 and r.json()["status"] == "deleted" and r.json()["download_url"] is None
        assert not folder.exists() and (lake.path / "_exports").is_dir()
        assert client.get(f"/api/exports/{export_id}").json()["status"] == "deleted"
        listed = {e["export_id"]: e for e in client.get("/api/exports").json()}
        assert listed[export_id]["status"] == "deleted" and listed[export_id]["download_url"] is None
        assert client.get(f"/api/exports/{export_id}/download").status_code == 409
        assert client.delete(f"/api/exports/{export_id}").status_code == 200  # deleting twice is fine
        assert client.delete("/api/exports/exp-nope").status_code == 404
        assert client.delete("/api/exports/..").status_code in (400, 404, 405)
        lake.invalidate()
        row = lake.sql("SELECT status, manifest FROM exports WHERE export_id = ?", [export_id]).to_pylist()[0]
        assert row["status"] == "deleted" and row["manifest"]  # the record stays


def test_an_export_written_elsewhere_is_not_deleted_from_the_server(client, lake, tmp_path):
    from episodelake.lake.export import ExportSpec, run_export

    result = run_export(lake, ExportSpec(format="swift", out=tmp_path / "mine"))
    r = client.delete(f"/api/exports/{result.export_id}")
    assert r.status_code == 409 and "yourself" in error_of(r)["message"]
    assert (tmp_path / "mine" / "manifest.json").is_file()


def test_a_lake_made_before_the_jobs_table_gains_it(tmp_path):
    lake = Lake(tmp_path / "old")
    import shutil

    shutil.rmtree(lake.path / "jobs.lance")
    with ServerThread(Settings(lake=lake.path, static_dir=None)) as srv:
        assert httpx.get(f"{srv.url}/api/jobs").json() == []
    assert tables.open_table(lake.path, "jobs").schema == schema.JOBS


def test_every_kind_is_listed_whoever_started_it_and_a_killed_commands_job_reads_interrupted(tmp_path):
    """Jobs started from the command line (re-run, import, back-fill) and from the API
    (export) are one list; a command killed mid-job shows `interrupted` on a running server."""
    lake = Lake(tmp_path / "lake")
    run_rollouts(lake, RolloutSpec(task_ids(2, seed=1), group_size=1, max_steps=6, run_id="seed"),
                 demo_agent("demo"), progress=False)
    bench = curation.create_set(lake, "bench", kind="regression")
    for episode_id in lake.sql("SELECT episode_id FROM episodes").column(0).to_pylist():
        curation.add_member(lake, bench["set_id"], episode_id)
    rerun = run_rerun(lake, RerunSpec(set="bench", policy="oracle", n=1, max_steps=8))
    factories.write_reference_episode(tmp_path / "clawgui", "wifi_on", "imported-0", 2)
    import_clawgui(lake, tmp_path / "clawgui", progress=False)
    backfill(lake, StepJudge(ModelClient("http://127.0.0.1:9/v1", "judge")), [], progress=False)

    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=60) as client:
        r = client.post("/api/exports", json={"format": "llamafactory", "val_fraction": 0.0})
        assert r.status_code == 202, r.text
        wait_job(client, f"/api/jobs/{r.json()['export_id']}", ("done", "failed", "interrupted"))
        killed = start_runner(lake, "imp-killed")
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(10)

        jobs = client.get("/api/jobs").json()
        by_kind = {}
        for job in jobs:
            by_kind.setdefault(job["kind"], []).append(job)
        assert sorted(by_kind) == ["export", "import", "judge", "rerun"]
        assert [j["status"] for j in by_kind["import"]] == ["interrupted", "done"]
        assert all(j["status"] == "done" for k in ("export", "judge", "rerun") for j in by_kind[k])
        assert by_kind["export"][0]["who"].startswith("api") and by_kind["rerun"][0]["pid"] == os.getpid()
        assert by_kind["judge"][0]["progress"] == {"done": 0, "total": 0}
        assert by_kind["rerun"][0]["result"]["fixed"] == len(rerun["fixed"])
        assert client.get("/api/jobs", params={"kind": "import", "status": "interrupted"}).json()[0]["job_id"] \
            == "imp-killed"
        listed = {r["rerun_id"]: r for r in client.get("/api/reruns").json()}
        assert listed[rerun["rerun_id"]]["status"] == "finished"
        assert listed[rerun["rerun_id"]]["progress"] == by_kind["rerun"][0]["progress"]
