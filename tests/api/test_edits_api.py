"""The edit endpoints on a real server: retask moves the episode in the task tree, split and
undo, delete; bad input answers the one error shape."""

from __future__ import annotations

import httpx
import pytest

from episodelake.api.settings import Settings
from tests.api.webapp_support import ServerThread, build_lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory):  # its own lake: these tests change it
    return build_lake(tmp_path_factory.mktemp("lake") / "lake")


@pytest.fixture(scope="module")
def client(lake):
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as c:
        yield c


def counts(client: httpx.Client) -> dict[str, int]:
    return {t["task_name"]: t["episodes"] for t in client.get("/api/tasks").json()}


def test_retask_moves_the_episode_in_the_task_tree(client):
    before = counts(client)
    answer = client.post("/api/episodes/wifi_on-2/retask", json={"task_name": "set_alarm",
                                                                   "task_goal": "Set an alarm for 8:00"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["op"] == "retask" and answer.json()["episode_ids"] == ["wifi_on-2"]
    after = counts(client)
    assert after["wifi_on"] == before["wifi_on"] - 1 and after["set_alarm"] == before["set_alarm"] + 1
    episode = client.get("/api/episodes/wifi_on-2").json()
    row = episode.get("episode", episode)
    assert row["task_goal"] == "Set an alarm for 8:00" and row["group_id"] is None
    job = client.get(f"/api/jobs/{answer.json()['job_id']}").json()
    assert job["kind"] == "edit" and job["who"].startswith("api")


def test_split_then_undo(client):
    answer = client.post("/api/episodes/set_alarm-1/split", json={"at": 2})
    assert answer.status_code == 200, answer.text
    assert answer.json()["episode_ids"] == ["set_alarm-1", "set_alarm-1.2"]
    assert client.get("/api/episodes/set_alarm-1.2").status_code == 200
    undone = client.post(f"/api/edits/{answer.json()['job_id']}/undo")
    assert undone.status_code == 200, undone.text
    assert client.get("/api/episodes/set_alarm-1.2").status_code == 404


def test_delete(client):
    assert client.delete("/api/episodes/send_message-0").status_code == 200
    assert client.get("/api/episodes/send_message-0").status_code == 404


@pytest.mark.parametrize("method,path,body,status,words", [
    ("post", "/api/episodes/nope/retask", {"task_name": "x"}, 404, "not in the lake"),
    ("post", "/api/episodes/wifi_on-0/split", {"at": 99}, 422, "outside episode"),
    ("delete", "/api/episodes/nope", None, 404, "unknown episode id"),
    ("post", "/api/edits/nope/undo", None, 404, "no edit"),
])
def test_bad_input_answers_the_error_shape(client, method, path, body, status, words):
    answer = client.request(method.upper(), path, json=body)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert words in error["message"] and error["type"]
