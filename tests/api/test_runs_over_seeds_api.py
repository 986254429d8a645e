"""Training runs over seeds through the API over a real server: runs that differ only in the
seed (and settings that do not change results) are one arm, its metric per iteration a mean
with a 95% t-interval over the runs; arms are labelled by the settings that tell them apart."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from episodelake.api.settings import Settings
from episodelake.lake.storage.lake import Lake
from episodelake.trainer.config import TrainConfig
from tests.api.webapp_support import ServerThread

#: held-out success per iteration of each run: (algo, lr_decay_to, seed, threads) -> curve
CURVES = {
    ("gigpo", 1.0, 0, 1): [0.2, 0.5, 0.6],
    ("gigpo", 1.0, 1, 4): [0.4, 0.7, 0.8],  # another thread count: the same arm
    ("gigpo", 1.0, 2, 1): [0.6, 0.9],  # still going: two iterations so far
    ("grpo", 1.0, 0, 1): [0.1, 0.3, 0.5],
    ("grpo", 1.0, 1, 1): [0.3, 0.5, 0.5],
    ("gigpo", 0.1, 0, 1): [0.2, 0.6, 0.7],
}


def rows() -> list[dict]:
    start = datetime(2026, 3, 1, tzinfo=UTC)
    out = []
    for (algo, decay, seed, threads), curve in CURVES.items():
        config = TrainConfig(advantages={"algo": algo}, lr_decay_to=decay, seed=seed, threads=threads,
                             run_id=f"{algo}-{decay}-{seed}")
        for i, value in enumerate(curve):
            out.append({"run_id": config.run_id, "iteration": i, "kind": "train", "config": config.to_json(),
                        "metrics": json.dumps({"eval_success_rate": value, "success_rate": 1 - value}),
                        "created_at": start + timedelta(minutes=i)})
    out.append({"run_id": "rerun-1", "iteration": 0, "kind": "rerun", "config": "{}",
                "metrics": json.dumps({"eval_success_rate": 1.0}), "created_at": start})
    return out


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    lake = Lake(tmp_path_factory.mktemp("runs") / "lake")
    lake.upsert("runs", rows())
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            yield c


def test_runs_differing_only_in_the_seed_are_one_arm_with_intervals(client):
    r = client.get("/api/runs/over-seeds")
    assert r.status_code == 200, r.text
    arms = {a["label"]: a for a in r.json()["arms"]}
    # labelled by what differs between arms; threads and seed do not make an arm
    assert set(arms) == {"algo=gigpo lr_decay_to=1.0", "algo=grpo lr_decay_to=1.0", "algo=gigpo lr_decay_to=0.1"}
    assert [a["label"] for a in r.json()["arms"]][0] == "algo=gigpo lr_decay_to=1.0"  # most runs first
    gigpo = arms["algo=gigpo lr_decay_to=1.0"]
    assert gigpo["seeds"] == [0, 1, 2] and gigpo["runs"] == ["gigpo-1.0-0", "gigpo-1.0-1", "gigpo-1.0-2"]
    assert gigpo["iterations"] == [0, 1, 2]
    first = gigpo["per_iteration"][0]  # 0.2, 0.4, 0.6: mean 0.4, sd 0.2, t(2) = 4.303
    assert first["n"] == 3 and first["mean"] == pytest.approx(0.4)
    assert first["high"] - first["mean"] == pytest.approx(4.303 * 0.2 / math.sqrt(3))
    last = gigpo["per_iteration"][2]  # the run still going has no third point
    assert last["n"] == 2 and last["mean"] == pytest.approx(0.7)
    assert gigpo["curves"][2] == [0.6, 0.9, None]
    # final: each run's last (up to) 5 points, then over runs
    finals = [sum(c) / len(c) for c in ([0.2, 0.5, 0.6], [0.4, 0.7, 0.8], [0.6, 0.9])]
    assert gigpo["final"]["mean"] == pytest.approx(sum(finals) / 3) and gigpo["final"]["n"] == 3
    single = arms["algo=gigpo lr_decay_to=0.1"]
    assert single["per_iteration"][1] == {"mean": 0.6, "low": None, "high": None, "n": 1}


def test_another_metric_and_a_missing_one(client):
    r = client.get("/api/runs/over-seeds", params={"metric": "success_rate"})
    grpo = next(a for a in r.json()["arms"] if a["label"] == "algo=grpo lr_decay_to=1.0")
    assert grpo["per_iteration"][0]["mean"] == pytest.approx(0.8)
    r = client.get("/api/runs/over-seeds", params={"metric": "no_such_metric"})
    assert r.status_code in (400, 422)
    assert "no training run recorded 'no_such_metric'" in r.text


def test_one_run_is_still_read_by_its_id(client):
    r = client.get("/api/runs/gigpo-1.0-0")
    assert r.status_code == 200 and r.json()["series"]["eval_success_rate"] == [0.2, 0.5, 0.6]
