"""Job records (`episodelake.lake.ops.jobs`): a job whose process was killed reads `interrupted`
at once and `reap` records it, a live process's job is left alone, a job refused before its
first report leaves no row, progress writes are throttled, Ctrl-C ends a job `interrupted`,
another machine's job is not judged from here, and a jobs table made before its newer
columns gains them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from datetime import UTC, datetime

import lance
import pyarrow as pa
import pytest

from episodelake.lake.ops.jobs import Job, get_job, list_jobs, reap
from episodelake.lake.storage import layout, schema, tables
from episodelake.lake.storage.errors import NotFound
from episodelake.lake.storage.lake import Lake

#: A command that runs a job, reports once and then works "forever" (until killed).
RUNNER = textwrap.dedent("""
    import sys, time
    from episodelake.lake.ops.jobs import Job
    from episodelake.lake.storage.lake import Lake

    job = Job(Lake(sys.argv[1]), "import", job_id=sys.argv[2], params={"dir": "somewhere"})
    with job.recording():
        job.progress(3, 10)
        print("recorded", flush=True)
        time.sleep(120)
""")


def start_runner(lake: Lake, job_id: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(lake.path), job_id], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "recorded"
    return proc


def test_a_killed_process_job_reads_interrupted_and_reap_records_it(lake):
    killed, alive = start_runner(lake, "imp-killed"), start_runner(lake, "imp-alive")
    try:
        lake.invalidate()
        assert get_job(lake, "imp-killed")["status"] == "running"
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(10)

        job = get_job(lake, "imp-killed")
        assert job["status"] == "interrupted" and job["error"]["type"] == "Interrupted"
        assert "stopped before it finished" in job["error"]["message"]
        assert job["progress"] == {"done": 3, "total": 10} and job["finished_at"] == job["updated_at"]
        assert job["pid"] == killed.pid and job["params"] == {"dir": "somewhere"}
        assert [j["job_id"] for j in list_jobs(lake, status="interrupted")] == ["imp-killed"]
        assert [j["job_id"] for j in list_jobs(lake, status="running")] == ["imp-alive"]
        stored = lake.sql("SELECT status FROM jobs WHERE job_id = 'imp-killed'").column(0)[0].as_py()
        assert stored == "running"  # reading changes nothing

        [marked] = reap(lake)
        assert marked["job_id"] == "imp-killed" and marked["status"] == "interrupted"
        lake.invalidate()
        rows = {r["job_id"]: r for r in lake.sql("SELECT job_id, status, owner FROM jobs").to_pylist()}
        assert rows["imp-killed"]["status"] == "interrupted" and rows["imp-alive"]["status"] == "running"
        assert not layout.lock_path(lake.path, f"jobs-{rows['imp-killed']['owner']}").exists()
        assert layout.lock_path(lake.path, f"jobs-{rows['imp-alive']['owner']}").exists()
        assert reap(lake) == []
    finally:
        for proc in (killed, alive):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def test_a_job_refused_before_its_first_report_leaves_no_row(lake):
    job = Job(lake, "export")
    with pytest.raises(NotFound), job.recording():
        raise NotFound("no set 'x'")
    assert job.status == "failed" and job.failure is not None
    assert get_job(lake, job.job_id) is None
    # once someone was told its id, its end is recorded whatever it is
    told = Job(lake, "export")
    told.keep_record()
    with pytest.raises(NotFound), told.recording():
        raise NotFound("no set 'x'")
    assert get_job(lake, told.job_id)["error"] == {"type": "NotFound", "message": "no set 'x'"}


def test_progress_writes_are_throttled_and_an_interrupt_ends_a_job_interrupted(lake):
    before = len(lake.dataset("jobs").versions())
    job = Job(lake, "judge", progress_interval_s=3600)
    seen = []
    job.listen(lambda done, total: seen.append(done))
    with pytest.raises(KeyboardInterrupt), job.recording():
        for i in range(200):
            job.progress(i, 200)
        raise KeyboardInterrupt
    lake.invalidate()
    assert len(lake.dataset("jobs").versions()) - before == 2  # accepted, ended
    recorded = get_job(lake, job.job_id)
    assert recorded["status"] == "interrupted" and recorded["progress"] == {"done": 199, "total": 200}
    assert "Ctrl-C" in recorded["error"]["message"] and seen == list(range(200))


def test_an_unexpected_failure_is_recorded_without_its_details(lake, caplog):
    job = Job(lake, "import")
    with pytest.raises(ZeroDivisionError), job.recording():
        job.progress(0, 1)
        1 / 0  # noqa: B018
    recorded = get_job(lake, job.job_id)
    assert recorded["status"] == "failed" and recorded["error"]["type"] == "InternalError"
    assert "ZeroDivisionError" in caplog.text  # the log has the traceback


def test_a_jobs_table_made_before_its_newer_columns_gains_them(tmp_path):
    lake = Lake(tmp_path / "old")
    old = pa.schema([f for f in schema.JOBS if f.name not in ("started_at", "host", "pid", "result")])
    shutil.rmtree(layout.table_path(lake.path, "jobs"))
    lance.write_dataset(pa.Table.from_pylist([{"job_id": "exp-old", "kind": "export", "status": "done",
                                               "params": json.dumps({"format": "swift"})}], schema=old),
                        str(layout.table_path(lake.path, "jobs")), enable_stable_row_ids=True)
    again = Lake(lake.path)
    assert tables.open_table(lake.path, "jobs").schema == schema.JOBS
    assert get_job(again, "exp-old")["params"] == {"format": "swift"}
    job = Job(again, "export")
    with job.recording():
        job.progress(1, 1)
    assert get_job(again, job.job_id)["pid"] == os.getpid()


def test_another_machines_job_reads_as_it_was_recorded(lake):
    """Its process's lock is on that machine: this one cannot tell whether it is alive."""
    now = datetime.now(UTC)
    lake.upsert("jobs", [{"job_id": "exp-there", "kind": "export", "status": "running", "owner": "gone-owner",
                          "host": "another-machine", "created_at": now, "updated_at": now},
                         {"job_id": "exp-here", "kind": "export", "status": "running", "owner": "gone-owner-2",
                          "host": socket.gethostname(), "created_at": now, "updated_at": now}])
    assert get_job(lake, "exp-there")["status"] == "running"
    assert get_job(lake, "exp-here")["status"] == "interrupted"
    assert [j["job_id"] for j in reap(lake)] == ["exp-here"]
