"""The runs table read back (`lake.ops.runs`), on a real lake with rows as the trainer and a
re-run write them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from episodelake.lake import Lake
from episodelake.lake.ops import runs

T0 = datetime(2026, 6, 1, tzinfo=UTC)


def row(run_id: str, iteration: int, kind: str, minute: int, **metrics: float) -> dict:
    return {"run_id": run_id, "iteration": iteration, "kind": kind, "config": json.dumps({"seed": iteration}),
            "metrics": json.dumps(metrics), "created_at": T0 + timedelta(minutes=minute)}


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    """train-1: an SFT warm-up (iteration -1) and iterations 0 and 1; rerun-1, written last."""
    lake = Lake(tmp_path_factory.mktemp("runs") / "lake")
    lake.upsert("runs", [row("train-1", 1, "train", 2, loss=0.5), row("train-1", -1, "sft_warmup", 0),
                         row("train-1", 0, "train", 1, loss=0.9), row("rerun-1", 0, "rerun", 5, delta=0.1)])
    lake.invalidate()
    return lake


def test_run_summaries_most_recently_updated_first_with_the_last_iteration(lake):
    rows = runs.run_summaries(lake)
    assert [r["run_id"] for r in rows] == ["rerun-1", "train-1"]
    train = rows[1]
    assert (train["kind"], train["iterations"], train["last_iteration"]) == ("train", 2, 1)
    assert json.loads(train["metrics"]) == {"loss": 0.5} and json.loads(train["config"]) == {"seed": 1}
    assert train["started_at"] < train["updated_at"]
    assert [r["run_id"] for r in runs.run_summaries(lake, "rerun")] == ["rerun-1"]
    assert runs.run_summaries(lake, "rollout") == []


def test_training_iterations_are_the_train_rows_in_order(lake):
    assert [(r["run_id"], r["iteration"]) for r in runs.training_iterations(lake)] == [("train-1", 0), ("train-1", 1)]


def test_run_iterations_in_order(lake):
    rows = runs.run_iterations(lake, "train-1")
    assert [(r["iteration"], r["kind"]) for r in rows] == [(-1, "sft_warmup"), (0, "train"), (1, "train")]
    assert set(rows[0]) == {"iteration", "kind", "config", "metrics", "created_at"}
    assert runs.run_iterations(lake, "nope") == []
