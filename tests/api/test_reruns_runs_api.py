"""Regression re-runs and training runs through the API over a real server, on a lake of
simulated-phone episodes: a re-run job that finishes and is listed with its numbers, bad
input named, and training metrics read back as series whatever keys they have."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from episodelake.api.settings import Settings
from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts, task_ids
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.storage.lake import Lake
from episodelake.lake.vocab.families import format_tool_call
from tests.api.webapp_support import ServerThread, error_of, screen
from tests.waiting import wait_job

TRAIN_RUN = "train-api-1"


def train_rows() -> list[dict]:
    """Three iterations as the trainer writes them, with the keys varying between them."""
    start = datetime(2026, 3, 1, tzinfo=UTC)
    metrics = [
        {"success_rate": 0.25, "eval_success_rate": None, "update": {"loss": 0.9, "policy_loss": 0.8},
         "seconds": {"rollout": 2.0, "update": 1.0}, "anchor_group_sizes": {"1": 10, "2": 4}},
        {"success_rate": 0.5, "eval_success_rate": 0.4, "update": {"loss": float("nan")},
         "seconds": {"rollout": 2.5, "update": 1.5}, "note": "text is no series", "flag": True},
        {"success_rate": 0.75, "eval_success_rate": 0.6, "update": {"loss": 0.3, "policy_loss": 0.2},
         "seconds": {"rollout": 2.2, "update": 1.1}},
    ]
    return [{"run_id": TRAIN_RUN, "iteration": i, "kind": "train", "config": json.dumps({"algo": "gigpo", "lr": 1e-3}),
             "metrics": json.dumps(m), "created_at": start + timedelta(minutes=i)} for i, m in enumerate(metrics)]


@pytest.fixture(scope="module")
def sim_lake(tmp_path_factory) -> Lake:
    lake = Lake(tmp_path_factory.mktemp("sim") / "lake")
    run_rollouts(lake, RolloutSpec(task_ids(3, seed=1), group_size=2, max_steps=8, run_id="seed-run"),
                 demo_agent("demo"), progress=False)
    with Recorder(lake, run_id="elsewhere", env="adb") as rec:  # a task the sim phone does not have
        ep = rec.start_episode("open_the_bank_app", "Open the bank app", episode_id="bank-0")
        ep.log_step(screen(0, 0), format_tool_call({"action": "terminate", "status": "fail"}), reward=0.0)
        ep.finish(success=False)
    lake.upsert("runs", train_rows())
    lake.invalidate()
    return lake


@pytest.fixture(scope="module")
def sim_client(sim_lake):
    with ServerThread(Settings(lake=sim_lake.path, static_dir=None), sim_lake) as srv:
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            yield c


def make_set(client, name: str, episode_ids: list[str]) -> str:
    sid = client.post("/api/sets", json={"name": name, "kind": "regression"}).json()["set_id"]
    for eid in episode_ids:
        assert client.put(f"/api/sets/{sid}/members/{eid}", json={}).status_code == 200
    return sid


def sim_episodes(client) -> list[dict]:
    return client.get("/api/episodes", params={"run_id": "seed-run", "limit": 100}).json()["items"]


@pytest.fixture(scope="module")
def finished_rerun(sim_client) -> dict:
    make_set(sim_client, "sim-benchmark", [e["episode_id"] for e in sim_episodes(sim_client)])
    r = sim_client.post("/api/reruns", json={"set": "sim-benchmark", "policy": "oracle", "n": 1, "max_steps": 10})
    assert r.status_code == 202, r.text
    assert r.json()["rerun_id"].startswith("rerun-") and r.json()["status"] in ("running", "finished")
    return wait_job(sim_client, f"/api/reruns/{r.json()['rerun_id']}", timeout_s=120)


def test_a_rerun_job_finishes_with_its_report(sim_client, finished_rerun):
    report = finished_rerun
    assert report["status"] == "finished" and report["error"] is None, report
    assert report["set"]["name"] == "sim-benchmark" and report["spec"]["policy"] == "oracle"
    assert len(report["tasks"]) == 3 and report["progress"] == {"done": 3, "total": 3}
    # the oracle solves every task: whatever failed before is fixed, nothing broke
    assert report["after"]["rate"] == 1.0 and report["broke"] == []
    assert sorted(report["fixed"]) == sorted(t["task"] for t in report["tasks"] if t["status"] == "fixed")
    low, high = report["interval"]
    assert low <= report["delta"] <= high and report["confidence"] == 0.95
    new_episodes = [i for t in report["tasks"] for i in t["episode_ids"]]
    assert len(new_episodes) == 3
    assert sim_client.get(f"/api/episodes/{new_episodes[0]}").json()["episode"]["run_id"] == report["rerun_id"]


def test_the_rerun_is_listed_with_its_numbers(sim_client, finished_rerun):
    listed = {r["rerun_id"]: r for r in sim_client.get("/api/reruns").json()}
    row = listed[finished_rerun["rerun_id"]]
    assert row["status"] == "finished" and row["policy"] == "oracle" and row["env"] == "sim" and row["n"] == 1
    assert (row["before"], row["after"], row["delta"]) == (
        finished_rerun["before"]["rate"], finished_rerun["after"]["rate"], finished_rerun["delta"])
    assert row["interval"] == finished_rerun["interval"]
    assert (row["fixed"], row["broke"]) == (len(finished_rerun["fixed"]), 0)
    assert row["set"]["name"] == "sim-benchmark"


def test_rerun_bad_input_is_named(sim_client):
    cases = [
        ({"set": "sim-benchmark", "policy": "model"}, 422, "policy"),
        ({"set": "sim-benchmark", "policy": "noisy:2"}, 422, "policy"),
        ({"set": "sim-benchmark", "policy": "oracle", "n": 0}, 422, "n"),
        ({"set": "sim-benchmark", "policy": "oracle", "env": "adb"}, 422, "env"),
        ({"set": "no-such-set", "policy": "oracle"}, 404, "no-such-set"),
    ]
    for body, status, word in cases:
        r = sim_client.post("/api/reruns", json=body)
        assert r.status_code == status and word in error_of(r)["message"], (body, r.text)
    make_set(sim_client, "bank", ["bank-0"])
    r = sim_client.post("/api/reruns", json={"set": "bank", "policy": "oracle"})
    assert r.status_code == 422 and "open_the_bank_app" in error_of(r)["message"]
    sim_client.post("/api/sets", json={"name": "empty"})
    r = sim_client.post("/api/reruns", json={"set": "empty", "policy": "random"})
    assert r.status_code == 404 and "no members" in error_of(r)["message"]
    r = sim_client.get("/api/reruns/rerun-000000000000")
    assert r.status_code == 404 and error_of(r)["type"] == "NotFound"
    r = sim_client.get("/api/reruns/rerun..x")
    assert r.status_code == 422 and "rerun_id" in error_of(r)["message"]


def test_runs_list_their_last_metrics(sim_client, finished_rerun):
    runs = {r["run_id"]: r for r in sim_client.get("/api/runs").json()}
    train = runs[TRAIN_RUN]
    assert (train["kind"], train["iterations"], train["last_iteration"]) == ("train", 3, 2)
    assert train["last_metrics"]["success_rate"] == 0.75 and train["last_metrics"]["update.loss"] == 0.3
    # the runs table's setting columns, from the recorded config (absent ones are null)
    assert (train["algo"], train["policy"], train["seed"]) == ("gigpo", None, None)
    assert train["config"] == {"algo": "gigpo", "lr": 1e-3}
    assert runs[finished_rerun["rerun_id"]]["kind"] == "rerun"
    only_train = sim_client.get("/api/runs", params={"kind": "train"}).json()
    assert [r["run_id"] for r in only_train] == [TRAIN_RUN]


def test_a_runs_metrics_come_back_as_series(sim_client):
    run = sim_client.get(f"/api/runs/{TRAIN_RUN}").json()
    assert run["kind"] == "train" and run["config"] == {"algo": "gigpo", "lr": 1e-3}
    assert [it["iteration"] for it in run["iterations"]] == [0, 1, 2]
    series = run["series"]
    assert series["success_rate"] == [0.25, 0.5, 0.75]
    assert series["eval_success_rate"] == [None, 0.4, 0.6]
    assert series["update.loss"] == [0.9, None, 0.3]  # NaN is null: JSON has no NaN
    assert series["update.policy_loss"] == [0.8, None, 0.2]  # absent in iteration 1
    assert series["seconds.rollout"] == [2.0, 2.5, 2.2] and series["anchor_group_sizes.2"] == [4.0, None, None]
    assert "note" not in series and "flag" not in series
    assert run["iterations"][1]["metrics"]["update"] == {"loss": None}
    assert not any(isinstance(v, float) and math.isnan(v) for v in series["update.loss"])


def test_unknown_and_bad_run_ids(sim_client):
    r = sim_client.get("/api/runs/no-such-run")
    assert r.status_code == 404 and "no-such-run" in error_of(r)["message"]
    r = sim_client.get("/api/runs/a..b")
    assert r.status_code == 422 and "run_id" in error_of(r)["message"]
