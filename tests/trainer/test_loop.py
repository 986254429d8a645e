"""The online loop on the simulated phone, for real: rollouts into a Lance lake, advantages by
SQL, PPO updates, runs rows, checkpoints, resuming, and `elake train`."""

from __future__ import annotations

import json

import pytest

from episodelake.api.cli import main
from episodelake.lake import Lake
from episodelake.trainer import checkpoint, loop
from episodelake.trainer.config import ConfigError, TrainConfig

pytestmark = pytest.mark.slow


def small(**settings) -> TrainConfig:
    base = {"tasks": 2, "group_size": 2, "iterations": 2, "max_steps": 3, "eval_repeats": 1,
            "run_id": "t", "minibatch_size": 8, "micro_batch_size": 4}
    return TrainConfig(**{**base, **settings})


def test_two_iterations_record_episodes_metrics_and_a_checkpoint(lake):
    result = loop.train(small(), lake, progress=False)
    assert len(result.metrics) == 2
    runs = lake.sql("SELECT iteration, kind, config, metrics FROM runs WHERE run_id = 't' "
                    "ORDER BY iteration").to_pylist()
    assert [(r["iteration"], r["kind"]) for r in runs] == [(0, "train"), (1, "train")]
    metrics = json.loads(runs[1]["metrics"])
    assert metrics["episodes"] == 4 and 0.0 <= metrics["success_rate"] <= 1.0
    assert metrics["eval_episodes"] == 5  # five held-out easy tasks, one episode each
    assert metrics["update"]["samples_scored"] == metrics["steps"] > 0
    assert metrics["advantages"]["groups"] + metrics["advantages"]["groups_dropped"] == 2
    assert set(metrics["seconds"]) == {"sample", "rollout", "advantages", "update", "evaluate",
                                       "checkpoint"}
    credit = metrics["credit"]  # scored against the sim judge's step marks (trainer/credit.py)
    assert set(credit) == {"overall", "pairs", "within_state", "state_pairs"}
    assert credit["pairs"] == 0 or 0.0 <= credit["overall"] <= 1.0
    assert sum(metrics["anchor_group_sizes"].values()) == \
        metrics["advantages"]["steps"]
    assert json.loads(runs[0]["config"])["advantages"]["algo"] == "gigpo"
    episodes = lake.sql("SELECT policy_version, count(*) AS n, count(DISTINCT group_id) AS groups "
                        "FROM episodes WHERE run_id = 't' GROUP BY ALL ORDER BY 1").to_pylist()
    assert episodes == [{"policy_version": "0", "n": 4, "groups": 2},
                        {"policy_version": "1", "n": 4, "groups": 2}]
    assert lake.sql("SELECT count(*) AS n FROM episodes WHERE run_id = 't.eval'")["n"][0].as_py() == 10
    root = result.checkpoint_dir
    newest = checkpoint.latest(root)
    assert newest is not None and newest.name == "iter-000001"
    assert (newest / "policy" / "model.safetensors").is_file()
    assert (newest / "optimizer.pt").is_file()
    assert [p.name for p in root.glob("iter-*")] == ["iter-000001"]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_same_seed_trains_the_same_policy(tmp_path, workers):
    """Episode ids are random and workers finish in any order; the update must depend on
    neither, or runs "paired by seed" (bench_learning --seeds) compare two different draws
    instead of two algorithms."""
    config = small(iterations=3, minibatch_size=2, micro_batch_size=2, workers=workers)
    weights = []
    for name in ("a", "b"):
        result = loop.train(config, Lake(tmp_path / name), progress=False)
        newest = checkpoint.latest(result.checkpoint_dir)
        assert newest is not None
        weights.append((newest / "policy" / "model.safetensors").read_bytes())
        assert result.metrics[0]["update"]["optimizer_steps"] > 1  # several minibatches to order
    assert weights[0] == weights[1]


def test_samples_join_advantages_to_the_recorded_steps(lake):
    # revisits paid: every intermediate row's reward is then the judge's score as recorded
    config = small(iterations=1, eval_repeats=0, holdout=0.0, advantages={"revisit_rewards": True})
    policy = loop.build_policy(config)
    report = loop.rollout(lake, policy, ["wifi_on"], config, run_id="j", version="0",
                          batch="b", seed=1, progress=False)
    batch = loop.step_advantages(lake, report, config, history_length=1)
    result, samples = batch.advantages, batch.samples
    assert len(samples) == report.steps == result.table.num_rows
    rows = {(r["episode_id"], r["step"]): r for r in result.table.to_pylist()}
    for sample in samples:
        row = rows[(sample.episode_id, sample.step)]
        assert sample.advantage == row["advantage"]
        steps = lake.steps(sample.episode_id,
                           columns=["step", "model_response", "step_reward"]).to_pylist()
        if sample.step < len(steps) - 1:  # the judge's reward; the last step's is the eval
            assert row["reward"] == steps[sample.step]["step_reward"]
        assert sample.response == steps[sample.step]["model_response"]
        assert list(sample.history) == [s["model_response"] for s in steps[:sample.step]]
        assert sample.goal == "Turn on Wi-Fi."
        assert sample.screenshot == lake.image(sample.episode_id, sample.step)[0]
        shown = [lake.image(sample.episode_id, sample.step - 1)[0]] if sample.step else []
        assert list(sample.history_images) == shown
    assert batch.credit is not None and batch.credit.pairs >= batch.credit.state_pairs
    # learning from outcomes only: the judge's marks are not in the advantages to score
    outcome = config.model_copy(update={"step_rewards": False})
    assert loop.step_advantages(lake, report, outcome, history_length=1).credit is None


def test_resume_continues_from_the_last_checkpoint_and_refuses_changes(lake):
    loop.train(small(iterations=1), lake, progress=False)
    with pytest.raises(ConfigError, match="--resume"):
        loop.train(small(iterations=2), lake, progress=False)
    with pytest.raises(ConfigError, match="group_size"):
        loop.train(small(iterations=2, group_size=3, resume=True), lake, progress=False)
    resumed = loop.train(small(iterations=2, resume=True), lake, progress=False)
    assert len(resumed.metrics) == 1  # only iteration 1 ran
    iterations = lake.sql("SELECT iteration FROM runs WHERE run_id = 't' ORDER BY 1")
    assert iterations["iteration"].to_pylist() == [0, 1]
    versions = lake.sql("SELECT DISTINCT policy_version AS v FROM episodes WHERE run_id = 't' "
                        "ORDER BY 1")["v"].to_pylist()
    assert versions == ["0", "1"]
    with pytest.raises(ConfigError, match="no checkpoint"):
        loop.train(small(run_id="other", resume=True), lake, progress=False)


def test_elake_train(tmp_path, capsys):
    code = main(["--lake", str(tmp_path / "lake"), "train", "--tasks", "1", "--group-size", "2",
                 "--iterations", "1", "--max-steps", "2", "--eval-repeats", "0",
                 "--run-id", "cli", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "run cli: 1 iteration(s)" in out and "SELECT iteration, metrics FROM runs" in out
    assert main(["--lake", str(tmp_path / "lake"), "train", "--group-size", "1"]) == 1
    assert "--group-size 2 or more" in capsys.readouterr().err


def test_vlm_policy_runs_an_iteration(lake, tiny_vlm):
    config = small(policy="vlm", model_path=str(tiny_vlm), tasks=1, iterations=1,
                   max_steps=2, eval_repeats=0, max_new_tokens=8, history_length=1,
                   engine="torch", generation="transformers")
    result = loop.train(config, lake, progress=False)
    metrics = result.metrics[0]
    assert metrics["update"]["samples_scored"] == metrics["steps"] > 0
    newest = checkpoint.latest(result.checkpoint_dir)
    assert (newest / "policy" / "config.json").is_file()
    assert list((newest / "policy").glob("*.safetensors"))


def test_learning_rate_falls_linearly_to_the_fraction_at_the_last_iteration():
    constant = small(iterations=5, lr=0.01)
    assert [loop.learning_rate(constant, i) for i in range(5)] == [0.01] * 5
    decaying = small(iterations=5, lr=0.01, lr_decay_to=0.2)
    assert [round(loop.learning_rate(decaying, i), 6) for i in range(5)] == [0.01, 0.008, 0.006, 0.004, 0.002]
    with pytest.raises(ConfigError, match="lr_decay_to"):
        small(lr_decay_to=0.0)


def test_target_kl_stops_the_epochs_and_the_optimizer_runs_at_the_scheduled_rate(lake):
    runs = {}
    for name, settings in {"all": {}, "stop": {"target_kl": 1e-9, "lr_decay_to": 0.5}}.items():
        config = small(run_id=name, iterations=2, eval_repeats=0, holdout=0.0, ppo_epochs=3,
                       minibatch_size=4, micro_batch_size=4, **settings)
        runs[name] = [m["update"] for m in loop.train(config, lake, progress=False).metrics]
    for stats in runs["all"]:
        assert not stats["stopped_early"] and stats["epochs"] == 3
        assert stats["optimizer_steps"] == 3 * (stats["samples_scored"] // 4)
    for stats in runs["stop"]:  # the first step moves the policy past any KL of 1.5e-9
        assert stats["samples_scored"] >= 8 and stats["stopped_early"]
        assert stats["optimizer_steps"] == 2  # one measured at the start (KL 0), one past it
    assert [s["lr"] for s in runs["stop"]] == [3e-3, 1.5e-3]


def test_branch_mode_keeps_the_episode_budget_and_learns_only_from_acted_steps(lake):
    """--branch failing: 2 of each group's 4 episodes are branches of its failed ones (a fresh
    tiny policy fails most), or fresh rollouts where nothing failed; 4 per group either way."""
    config = small(tasks=3, group_size=4, branch="failing", branch_n=2, iterations=1, max_steps=4,
                   eval_repeats=0, run_id="tb")
    result = loop.train(config, lake, progress=False)
    metrics = result.metrics[0]
    branching = metrics["branching"]
    assert branching["planned"] + branching["fresh_instead"] == 2 * 3
    assert branching["recorded"] == branching["planned"] > 0 and branching["refused"] == 0
    groups = lake.sql("SELECT group_id, count(*) AS n, count(branch_of) AS branches FROM episodes "
                      "WHERE run_id = 'tb' GROUP BY ALL").to_pylist()
    assert len(groups) == 3 and all(g["n"] == 4 for g in groups) and metrics["episodes"] == 12
    branches = lake.sql(
        "SELECT b.branch_step, b.group_id = p.group_id AS same_group, p.success AS parent_success, "
        "(SELECT min(step) FROM steps s WHERE s.episode_id = p.episode_id AND s.step_reward < 0.5) AS failing "
        "FROM episodes b JOIN episodes p ON b.branch_of = p.episode_id WHERE b.run_id = 'tb'").to_pylist()
    assert len(branches) == branching["recorded"]
    assert all(b["same_group"] and b["parent_success"] is False and b["branch_step"] == b["failing"]
               for b in branches)
    replayed = lake.sql("SELECT count(*) AS n FROM steps s JOIN episodes e USING (episode_id) "
                        "WHERE e.run_id = 'tb' AND json_extract(s.info, '$.replayed') IS NOT NULL").to_pylist()[0]["n"]
    assert replayed == branching["replayed_steps"]
    # the replayed steps are the parents': learnt from once, in the parents' rows
    assert metrics["advantages"]["steps"] == metrics["steps"] - replayed
    assert metrics["update"]["samples"] == metrics["advantages"]["steps"]
    assert 0.0 <= metrics["shared_anchor_groups"] <= 1.0


def test_branch_n_must_leave_fresh_rollouts():
    with pytest.raises(ConfigError, match="branch_n: 4 branches leave no fresh rollout"):
        small(group_size=4, branch="failing", branch_n=4)
