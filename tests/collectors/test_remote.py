"""The environment-server client against our sim server over loopback: whole episodes, a
server that dies mid-episode, slow answers, malformed answers, rejected actions, tokens."""

from __future__ import annotations

import asyncio

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse

from episodelake.collectors.envs.base import Task
from episodelake.collectors.envs.remote import RemoteDevice, RemoteOptions, read_server_file
from episodelake.collectors.envs.server import create_app
from episodelake.collectors.envs.sim.device import SimDevice, task_infos
from episodelake.collectors.loop import collect_one, run_episode
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.storage.errors import DeviceError, DeviceUnavailable
from tests.collectors.device_support import ScriptedPolicy, oracle_script

FAST = RemoteOptions(health_timeout_s=2, init_timeout_s=5, screenshot_timeout_s=2,
                     step_timeouts_s=(2,), eval_timeout_s=2, tear_down_timeout_s=2,
                     retry_wait_s=0.05)


@pytest.fixture
def recorder(lake):
    rec = Recorder(lake, anchor=None)
    yield rec
    rec.close()


def test_a_whole_episode_over_http(sim_server, recorder, lake):
    server = sim_server()
    script = oracle_script("wifi_on")
    device = RemoteDevice([server.url], options=FAST)
    summary = run_episode(device, ScriptedPolicy(script), recorder, Task("wifi_on"), max_steps=10)
    recorder.flush()
    assert (summary.status, summary.success, summary.eval_score) == ("finished", True, 1.0)
    assert summary.steps == len(script)
    episode = lake.episode(summary.episode_id)
    assert episode["env"] == "mobileworld" and episode["device"] == f"{server.url}#sim-0"
    assert episode["task_goal"] == SimDevice(0).start_task(Task("wifi_on"))
    local = SimDevice(0)
    local.start_task(Task("wifi_on"))
    assert lake.image(summary.episode_id, 0)[0] == local.screenshot()  # bytes as sent
    infos = lake.sql("SELECT info FROM steps ORDER BY step").to_pylist()
    assert all('"result"' in row["info"] for row in infos)


def test_a_server_that_dies_mid_episode(sim_server, recorder, lake):
    first, second = sim_server(), sim_server()
    script = oracle_script("wifi_on")
    policy = ScriptedPolicy(script, before_step={2: first.stop})
    device = RemoteDevice([first.url, second.url], options=FAST)
    one, two = (collect_one(device, policy, recorder, Task("wifi_on"), max_steps=10) for _ in range(2))
    recorder.flush()
    # steps 0 and 1 went through; step 2's action met the dead server and is kept with why
    assert one.status == "aborted" and one.steps == 3
    assert f"environment server {first.url} lost" in one.reason
    infos = lake.steps(one.episode_id, ["step", "info"]).to_pylist()
    assert [i["step"] for i in infos] == [0, 1, 2] and "Connection refused" in infos[2]["info"]
    assert lake.episode(one.episode_id)["status"] == "aborted"
    assert (two.status, two.success) == ("finished", True)
    assert lake.episode(two.episode_id)["device"] == f"{second.url}#sim-0"


def slow_app(paths: dict[str, float]) -> FastAPI:
    app = create_app({"sim-0": SimDevice(0)}, task_infos())
    app.state.hits = []

    @app.middleware("http")
    async def delay(request: Request, call_next):
        app.state.hits.append(request.url.path)
        await asyncio.sleep(paths.get(request.url.path, 0))
        return await call_next(request)

    return app


def test_slow_steps_time_out_with_growing_timeouts_then_the_episode_aborts(live, recorder):
    app = slow_app({"/step": 1.0})
    server = live(app)
    options = RemoteOptions(**{**FAST.__dict__, "step_timeouts_s": (0.2, 0.3)})
    device = RemoteDevice([server.url], options=options)
    summary = run_episode(device, ScriptedPolicy(oracle_script("wifi_on")), recorder,
                          Task("wifi_on"), max_steps=5)
    assert summary.status == "aborted" and summary.steps == 1
    assert "no answer within 0.3s" in summary.reason
    assert app.state.hits.count("/step") == 2


def test_slow_health_moves_on_to_the_next_server(live, sim_server, recorder):
    slow = live(slow_app({"/health": 1.0}))
    good = sim_server()
    options = RemoteOptions(**{**FAST.__dict__, "health_timeout_s": 0.2})
    device = RemoteDevice([slow.url, good.url], options=options)
    summary = run_episode(device, ScriptedPolicy(oracle_script("wifi_on")), recorder,
                          Task("wifi_on"), max_steps=10)
    assert summary.success and device.pool.current == good.url


def broken_server(answers: dict[str, str]) -> FastAPI:
    """A server whose endpoints answer the given raw text (malformed JSON and the like)."""
    app = FastAPI()
    ok = {"/health": '{"ok": true, "devices": ["d"], "device_status": {"d": true}}',
          "/init": '{"device": "d", "viewport_size": [1080, 2400]}',
          "/task/goal": '"do it"', "/task/init": '"OK"', "/task/tear_down": '"OK"'}

    @app.api_route("/{path:path}", methods=["GET", "POST"])
    def anything(path: str):
        return PlainTextResponse(answers.get(f"/{path}", ok.get(f"/{path}", "{}")),
                                 media_type="application/json")

    return app


@pytest.mark.parametrize("answer,problem", [
    ('{"device": "d", "b64_png": "iVBOR', "the answer is not JSON"),
    ('{"device": "d", "b64_png": "***"}', "not valid base64"),
    ('{"device": "d", "b64_png": "aGVsbG8="}', "b64_png is not an image"),
    ('{"device": "d"}', "no b64_png"),
])
def test_malformed_screenshots_abort_the_episode(live, recorder, answer, problem):
    server = live(broken_server({"/screenshot": answer}))
    device = RemoteDevice([server.url], options=FAST)
    summary = run_episode(device, ScriptedPolicy([]), recorder, Task("t"), max_steps=3)
    assert summary.status == "aborted" and summary.steps == 0
    assert problem in summary.reason


def test_malformed_health_and_dead_servers_leave_nothing_to_drive(live):
    bad = live(broken_server({"/health": "<html>502 Bad Gateway</html>"}))
    device = RemoteDevice([bad.url, "http://127.0.0.1:9"], options=FAST)
    with pytest.raises(DeviceUnavailable) as caught:
        device.start_task(Task("t"))
    message = str(caught.value)
    assert f"{bad.url}/health: the answer is not JSON" in message
    assert "http://127.0.0.1:9/health: ConnectError" in message
    assert "curl URL/health" in message


def test_an_unknown_task_is_skipped_without_blaming_the_server(sim_server, recorder):
    server = sim_server()
    device = RemoteDevice([server.url], options=FAST)
    with pytest.raises(DeviceError, match="refused task 'no_such_task'.*task/list"):
        device.start_task(Task("no_such_task"))
    skipped = collect_one(device, ScriptedPolicy([]), recorder, Task("no_such_task"))
    assert skipped.status == "skipped" and skipped.episode_id is None
    assert device.pool.current == server.url


def test_a_rejected_action_is_kept_and_the_episode_goes_on(sim_server, recorder, lake):
    server = sim_server()
    script = [{"action": "open", "text": "No Such App"}, *oracle_script("wifi_on")]
    device = RemoteDevice([server.url], options=FAST)
    summary = run_episode(device, ScriptedPolicy(script), recorder, Task("wifi_on"), max_steps=10)
    recorder.flush()
    assert summary.status == "finished"
    first = lake.sql("SELECT info FROM steps WHERE step = 0").to_pylist()[0]["info"]
    assert "the server rejected" in first and "HTTP 422" in first and "No Such App" in first


def test_tokens(live, recorder):
    server = live(create_app({"sim-0": SimDevice(0)}, task_infos(), token="s3cret"))
    with pytest.raises(DeviceUnavailable, match="HTTP 401: missing or wrong token"):
        RemoteDevice([server.url], options=FAST).start_task(Task("wifi_on"))
    options = RemoteOptions(**{**FAST.__dict__, "token": "s3cret"})
    device = RemoteDevice([server.url], options=options)
    assert "Wi-Fi" in device.start_task(Task("wifi_on"))


def test_server_file(tmp_path):
    f = tmp_path / "servers.txt"
    f.write_text("# pool\nhttp://a:7000\n\n  http://b:7001#emulator-5554  \n")
    assert read_server_file(f) == ["http://a:7000", "http://b:7001#emulator-5554"]
    f.write_text("# nothing\n")
    with pytest.raises(DeviceUnavailable, match="lists no URL"):
        read_server_file(f)
    with pytest.raises(DeviceUnavailable, match="must start with http"):
        RemoteDevice(["a:7000"])
