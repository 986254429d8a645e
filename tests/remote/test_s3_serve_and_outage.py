"""`elake serve` reading an S3 lake (a real server on loopback, images by range reads), and
the store going away mid-run: acknowledged rows wait in the local spool and all land, once,
when it is back (the outage is a network block in front of moto's real S3 API)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake, WriterOptions
from episodelake.lake.storage.writer import CommitFailed
from tests.factories import child_env, free_port, response, screenshot
from tests.remote.proxy import flush_once_back
from tests.waiting import wait_serving


@contextmanager
def _serve(env: dict[str, str]) -> Iterator[str]:
    """`elake serve` in a child process, yielding its base URL once /api/health answers."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "episodelake.api.cli", "serve", "--port", str(port)],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_serving(f"{base}/api/health", proc, timeout_s=120)
        yield base
    finally:
        proc.terminate()
        proc.wait(20)


def test_serve_reads_an_s3_lake_and_fetches_an_image(s3_lake, s3_env):
    with Recorder(s3_lake, image_checks="structure") as rec:
        with rec.start_episode("wifi_on", episode_id="ep-1") as ep:
            for s in range(3):
                ep.log_step(screenshot(s), response())
            ep.finish(success=True)
    with _serve(s3_env) as base:
        health = httpx.get(f"{base}/api/health", timeout=30)
        # a server that needs no token is its owner's: it says where the lake lives, and its name
        assert health.status_code == 200 and health.json()["location"] == s3_lake and health.json()["lake"] == "lake"
        image = httpx.get(f"{base}/api/episodes/ep-1/steps/2/image", timeout=30)
        assert image.status_code == 200 and image.content == screenshot(2)
        episode = httpx.get(f"{base}/api/episodes/ep-1", timeout=30)
        assert episode.status_code == 200 and '"ep-1"' in episode.text


def test_store_unreachable_mid_run_loses_nothing(s3_proxied_lake, s3_proxy):
    options = WriterOptions(batch_rows=5, max_age_s=0.3)
    rec = Recorder(s3_proxied_lake, image_checks="structure", options=options)
    ep = rec.start_episode("t", episode_id="outage")
    for s in range(6):
        ep.log_step(screenshot(s), response())
    rec.flush()
    with s3_proxy.blocked():
        for s in range(6, 20):  # acknowledged: in the local spool, commits fail and are retried
            ep.log_step(screenshot(s % 5), response())
        with pytest.raises(CommitFailed, match="stay in this writer's spool"):
            rec.writer.flush()
    flush_once_back(rec)  # the background retry, or a flush, lands them once the store is back
    ep.finish(success=True)
    rec.close()
    lake = Lake(s3_proxied_lake)
    rows = lake.sql("select count(*) n, count(distinct step) d from steps where episode_id = 'outage'")
    assert rows.to_pylist()[0] == {"n": 20, "d": 20}


DIES = textwrap.dedent("""
    import sys
    from tests.factories import response, screenshot
    from episodelake.collectors.record.recorder import Recorder
    from episodelake.lake import WriterOptions
    rec = Recorder({lake!r}, image_checks="structure", options=WriterOptions(batch_rows=4, max_age_s=0.3))
    ep = rec.start_episode("t", episode_id="dies")
    print("started", flush=True)
    sys.stdin.readline()
    for s in range(10):
        ep.log_step(screenshot(s % 5), response())
    print("acknowledged", flush=True)
    sys.stdin.readline()
""")


def test_writer_killed_during_an_outage_is_replayed_once_the_store_is_back(s3_proxied_lake, s3_proxy, s3_env):
    proc = subprocess.Popen([sys.executable, "-c", DIES.format(lake=s3_proxied_lake)], env=child_env(s3_env),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        with s3_proxy.blocked():
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "acknowledged"  # 10 steps in its local spool
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
    finally:
        proc.kill()
    lake = Lake(s3_proxied_lake)
    assert lake.recover()["problems"] == {}
    rows = lake.sql("select count(*) n, count(distinct step) d from steps where episode_id = 'dies'")
    assert rows.to_pylist()[0] == {"n": 10, "d": 10}


def test_serve_answers_one_json_error_while_the_store_is_unreachable(s3_proxied_lake, s3_proxy, s3_env):
    with Recorder(s3_proxied_lake, image_checks="structure") as rec:
        with rec.start_episode("wifi_on", episode_id="ep-1") as ep:
            ep.log_step(screenshot(0), response())
    with _serve(s3_env) as base:
        with s3_proxy.blocked():
            got = httpx.get(f"{base}/api/episodes/ep-1/steps/0/image", timeout=120)
        assert got.status_code == 503, got.text
        error = got.json()["error"]
        assert error["type"] == "StoreUnavailable" and s3_proxied_lake in error["message"]
        assert "cannot be reached" in error["message"] and "testing-secret" not in got.text
        assert httpx.get(f"{base}/api/episodes/ep-1/steps/0/image", timeout=60).content == screenshot(0)
