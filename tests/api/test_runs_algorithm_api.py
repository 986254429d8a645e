"""The runs table's setting columns read the config as the trainer records it now: the
advantage settings (`algo` among them) nested under `advantages`, beside the others. GiGPO
runs showed "-" for their algorithm when only a flat `algo` was read."""

from __future__ import annotations

import json

from episodelake.trainer.config import TrainConfig


def test_the_algorithm_of_a_recorded_run_is_listed(client, lake):
    for algo in ("gigpo", "grpo"):
        config = TrainConfig.from_settings({"algo": algo, "seed": 3})
        assert "algo" not in json.loads(config.to_json())  # nested, as the trainer stores it
        lake.upsert("runs", [{"run_id": f"train-{algo}-nested", "iteration": 0, "kind": "train",
                              "config": config.to_json(), "metrics": json.dumps({"success_rate": 0.5})}])
    listed = {r["run_id"]: r for r in client.get("/api/runs", params={"kind": "train"}).json()}
    for algo in ("gigpo", "grpo"):
        run = listed[f"train-{algo}-nested"]
        assert (run["algo"], run["policy"], run["seed"]) == (algo, TrainConfig().policy, 3)
