"""Job records on a lake two machines share (S3 on moto): a server starting on this machine
does not mark the job another machine is running interrupted (its owner's lock is on that
machine), while a job of this machine whose process was killed is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from episodelake.lake import Lake
from episodelake.lake.ops.jobs import get_job, reap

RUNNER = textwrap.dedent("""
    import socket, sys, time
    if {host!r}:
        socket.gethostname = lambda: {host!r}  # another machine
    from episodelake.lake import Lake
    from episodelake.lake.ops.jobs import Job
    job = Job(Lake({lake!r}), "export", job_id={job_id!r})
    with job.recording():
        job.progress(0, 1)
        print("running", flush=True)
        time.sleep(120)
""")


def start(lake: str, job_id: str, env: dict, host: str = "") -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", RUNNER.format(lake=lake, job_id=job_id, host=host)],
                            env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "running"
    return proc


def test_a_job_on_another_machine_is_not_reaped_here(s3_lake, s3_env, tmp_path):
    # node-a: its own host name and its own local disk for spools and locks
    there = start(s3_lake, "exp-node-a", {**s3_env, "ELAKE_SPOOL": str(tmp_path / "node-a")}, host="node-a")
    here = start(s3_lake, "exp-here", s3_env)
    try:
        lake = Lake(s3_lake)
        assert reap(lake) == []  # both alive: nothing to mark
        os.kill(here.pid, signal.SIGKILL)
        here.wait()
        lake.invalidate()
        assert get_job(lake, "exp-here")["status"] == "interrupted"
        assert [j["job_id"] for j in reap(lake)] == ["exp-here"]
        # node-a's job runs on; this machine cannot see its lock and leaves it as recorded
        lake.invalidate()
        assert get_job(lake, "exp-node-a")["status"] == "running"
        assert get_job(lake, "exp-node-a")["host"] == "node-a"
    finally:
        for proc in (there, here):
            proc.kill()
            proc.wait()
