"""Judge back-fill on Ray: the same rewards and reasons as one process, written through the
lake's update path with the job's progress; the API key is read by the tasks from their own
environment, never shipped; the verdict cache stays with the driver and serves the tasks."""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from episodelake.api.cli import main
from episodelake.collectors.agents.judge import JudgeCache, StepJudge
from episodelake.collectors.agents.model_client import ModelClient, ModelOptions
from episodelake.collectors.jobs.backfill import JudgeSpec, backfill
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from tests.factories import needs_ray, response, screenshot

pytestmark = [needs_ray, pytest.mark.slow, pytest.mark.filterwarnings("ignore:lance is not fork-safe")]

KEY = "judge-key-never-shipped"


class DeterministicJudge:
    """An OpenAI-compatible judge on loopback whose answer depends only on the request
    (so tasks asking in any order get what one process gets): reward 0 or 1, or, for about
    one step in five, an answer that is no verdict. It requires the bearer key."""

    def __init__(self):
        self.requests = 0
        self.unauthorised = 0
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                judge.requests += 1
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    judge.unauthorised += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                digest = hashlib.sha256(json.dumps(json.loads(body)["messages"]).encode()).digest()
                answer = ("no verdict" if digest[0] % 5 == 0 else
                          json.dumps({"reason": f"seen {digest[:4].hex()}", "reward": digest[1] % 2}))
                payload = json.dumps({"choices": [{"message": {"content": answer}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def judge_server():
    server = DeterministicJudge()
    yield server
    server.close()


@pytest.fixture
def ray_with_key(monkeypatch):
    """A local cluster started with the judge's key in its environment, as worker nodes
    started with it would have."""
    import ray

    monkeypatch.setenv("JUDGE_KEY", KEY)
    ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def rewards(lake: Lake) -> list[dict]:
    lake.invalidate()
    return lake.sql("SELECT episode_id, step, step_reward, step_reward_reason FROM steps "
                    "ORDER BY episode_id, step").to_pylist()


def test_judge_on_ray_stores_what_one_process_stores(tmp_path, judge_server, ray_with_key):
    here = Lake(tmp_path / "here")
    with Recorder(here, anchor=None) as rec:
        for e in range(6):
            with rec.start_episode("wifi_on", f"Turn on Wi-Fi ({e})", episode_id=f"ep-{e}") as ep:
                for s in range(3):
                    ep.log_step(screenshot(10 * e + s), response(coordinate=[s, e]))
                ep.finish(success=True)
    shutil.copytree(here.path, tmp_path / "ray")
    there = Lake(tmp_path / "ray")
    ids = [f"ep-{e}" for e in range(6)]

    quick = ModelOptions(timeout_s=10, max_retries=0, temperature=0.1, max_tokens=512)
    client = ModelClient(judge_server.url, "judge", api_key=KEY, options=quick)
    single = backfill(here, StepJudge(client, attempts=1), ids, progress=False)
    assert single.judged == 12 and 0 < single.invalid < 12  # both kinds of answer occur
    asked_here = judge_server.requests

    cache = tmp_path / "verdicts.sqlite"
    argv = ["--lake", str(there.path), "judge", "--where", "true", "--model-url", judge_server.url,
            "--model", "judge", "--attempts", "1", "--api-key-env", "JUDGE_KEY", "--cache", str(cache),
            "--ray"]
    assert main(argv) == 0
    assert judge_server.unauthorised == 0 and judge_server.requests == 2 * asked_here
    assert rewards(there) == rewards(here)
    assert sum(r["step_reward"] is not None for r in rewards(there)) == 12 - single.invalid

    jobs = there.sql("SELECT kind, status, done, total FROM jobs").to_pylist()
    assert jobs == [{"kind": "judge", "status": "done", "done": 6, "total": 6}]

    # the tasks' new verdicts were added to the driver's cache file, and a rerun on Ray
    # is served from it: only the invalid steps are asked again
    held = JudgeCache(cache)
    assert len(held.verdicts()) == 12 - single.invalid
    held.close()
    assert main([*argv, "--redo"]) == 0
    assert judge_server.requests == 2 * asked_here + single.invalid
    assert rewards(there) == rewards(here)


def test_a_judge_spec_carries_no_key(monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", KEY)
    client = ModelClient("http://127.0.0.1:9/v1", "judge", api_key=KEY)
    spec = JudgeSpec.of(StepJudge(client), "JUDGE_KEY")
    assert KEY.encode() not in pickle.dumps(spec) and KEY not in repr(spec)
    opened = spec.open()  # the key comes from the variable where the spec is opened
    assert opened.client._http.headers["Authorization"] == f"Bearer {KEY}"
    opened.client.close()
    client.close()
