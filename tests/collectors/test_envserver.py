"""The sim environment server's API shapes, and our action record <-> JSONAction."""

from __future__ import annotations

import base64

import pytest
from fastapi.testclient import TestClient

from episodelake.collectors.envs.base import Screen
from episodelake.collectors.envs.jsonaction import from_json_action, to_json_action
from episodelake.collectors.envs.server import create_app, is_loopback, serve
from episodelake.collectors.envs.sim.device import SimDevice, task_infos
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.families import format_tool_call, parse_response
from tests.collectors.device_support import elake


@pytest.fixture
def client():
    app = create_app({"sim-0": SimDevice(0), "sim-1": SimDevice(1, name="sim-1")}, task_infos())
    return TestClient(app)


def test_health_init_and_screenshot(client):
    assert client.get("/health").json() == {"ok": True, "devices": ["sim-0", "sim-1"],
                                            "device_status": {"sim-0": True, "sim-1": True}}
    assert client.post("/init", params={"device": "sim-1"}).json() == {
        "device": "sim-1", "viewport_size": [1080, 2400]}
    assert client.get("/init").json()["device"] == "sim-0"
    shot = client.get("/screenshot", params={"device": "sim-0", "return_b64": "true"}).json()
    assert shot["path"] is None and base64.b64decode(shot["b64_png"]).startswith(b"\x89PNG")
    assert client.get("/screenshot", params={"device": "nope"}).status_code == 404


def test_task_lifecycle(client):
    tasks = client.get("/task/list").json()
    assert {"name": "wifi_on", "tags": ["easy", "wifi_on"], "apps": []} in tasks
    goal = client.get("/task/goal", params={"task_name": "wifi_on"}).json()
    assert isinstance(goal, str) and goal
    body = {"task_name": "wifi_on", "req_device": "sim-0"}
    assert client.request("GET", "/task/eval", json=body).status_code == 409  # not started
    assert client.post("/task/init", json=body).json() == "OK"
    assert client.request("GET", "/task/eval", json=body).json() == {
        "score": 0.0, "reason": "the goal does not hold on the phone"}
    assert client.post("/task/tear_down", json=body).json() == "OK"
    assert client.get("/task/goal", params={"task_name": "nope"}).status_code == 404


def test_step_results_and_rejections(client):
    step = client.post("/step", json={"device": "sim-0",
                                      "action": {"action_type": "open_app", "app_name": "Settings"}})
    assert step.status_code == 200 and step.json()["result"] == "opened Settings"
    bad_type = client.post("/step", json={"action": {"action_type": "fly"}})
    assert bad_type.status_code == 422 and "action_type 'fly'" in bad_type.json()["detail"]
    bad_dir = client.post("/step", json={"action": {"action_type": "swipe", "direction": "diagonal"}})
    assert bad_dir.status_code == 422 and "direction" in bad_dir.json()["detail"]
    refused = client.post("/step", json={"action": {"action_type": "open_app", "app_name": "Nope"}})
    assert refused.status_code == 422 and "no app named 'Nope'" in refused.json()["detail"]
    # the reference rejects app_switch; ours takes it (system_button menu)
    assert client.post("/step", json={"action": {"action_type": "app_switch"}}).status_code == 200


def test_no_file_download_endpoint(client):
    assert client.get("/download", params={"path": "/etc/passwd"}).status_code == 404


def test_other_binds_need_a_token():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    with pytest.raises(InvalidInput, match="pass --token"):
        serve({"sim-0": SimDevice(0)}, [], host="0.0.0.0", port=1)


SCREEN = Screen(1080, 2400)


@pytest.mark.parametrize("arguments", [
    {"action": "click", "coordinate": [0, 0]},
    {"action": "long_press", "coordinate": [999, 999]},
    {"action": "double_tap", "coordinate": [123, 876]},
    {"action": "swipe", "direction": "up"},
    {"action": "swipe", "direction": "left", "coordinate": [500, 500]},
    {"action": "drag", "start_coordinate": [100, 200], "end_coordinate": [900, 800]},
    {"action": "type", "text": "héllo wörld"},
    {"action": "open", "text": "Settings"},
    {"action": "answer", "text": "42"},
    {"action": "system_button", "button": "back"},
    {"action": "system_button", "button": "menu"},
    {"action": "system_button", "button": "enter"},
    {"action": "wait"},
    {"action": "terminate", "status": "fail"},
])
def test_json_action_round_trip(arguments):
    parsed = parse_response(format_tool_call(arguments))
    wire = to_json_action(parsed, SCREEN)
    back = from_json_action(wire, SCREEN)
    assert back.valid and back.action_type == parsed.action_type
    for key in ("direction", "text", "button", "status"):
        assert back.action.get(key) == parsed.action.get(key)
    for a, b in ((back.x, parsed.x), (back.y, parsed.y), (back.x2, parsed.x2), (back.y2, parsed.y2)):
        assert (a is None) == (b is None)
        if a is not None:
            assert abs(a - b) <= 1 / 1080  # within one pixel


def test_json_action_names_follow_the_reference():
    def wire(**arguments):
        return to_json_action(parse_response(format_tool_call(arguments)), SCREEN)

    assert wire(action="type", text="x") == {"action_type": "input_text", "text": "x"}
    assert wire(action="open", text="Clock") == {"action_type": "open_app", "app_name": "Clock"}
    assert wire(action="terminate", status="success") == {"action_type": "status",
                                                          "goal_status": "success"}
    assert wire(action="system_button", button="back") == {"action_type": "navigate_back"}
    assert wire(action="click", coordinate=[999, 999]) == {"action_type": "click", "x": 1079, "y": 2399}
    with pytest.raises(ValueError, match="only valid actions"):
        to_json_action(parse_response("garbage"), SCREEN)


def test_serve_env_command(capsys):
    assert elake(["serve-env", "--sim", "--list-tasks"]) == 0
    assert "\nwifi_on\t" in "\n" + capsys.readouterr().out
    assert elake(["serve-env", "--sim", "--host", "0.0.0.0", "--token", ""]) == 1
    assert "pass --token" in capsys.readouterr().err
