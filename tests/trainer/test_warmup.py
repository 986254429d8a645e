"""The SFT warm-up of `elake train --policy vlm` (trainer/warmup.py): it learns from exactly
the samples `sft_dataset` yields, through the policy's own input building; its loss goes down,
lands in `runs` apart from the RL iterations, and its lineage names what it read.

A real Lance lake in a tmp folder (the export tests' factory) and the tiny Qwen2-VL built
offline (tests/trainer/tiny_vlm.py), on CPU.
"""

from __future__ import annotations

import json

import pytest

from episodelake.api.cli import main
from episodelake.api.routes.runs import runs as list_runs
from episodelake.lake import Lake
from episodelake.lake.export.errors import EmptySelection
from episodelake.lake.ops.lineage import lineage_of
from episodelake.lake.storage.errors import NotFound, SqlRefused
from episodelake.trainer import checkpoint, loop, warmup
from episodelake.trainer.config import ConfigError, TrainConfig
from episodelake.trainer.data import sft_dataset
from episodelake.trainer.engine import build_engine
from episodelake.trainer.policies.vlm import VLMPolicy
from tests.lake.export.test_export import build_lake

pytestmark = pytest.mark.slow

WHERE = "task_name IN ('task-2', 'task-3')"


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    return build_lake(tmp_path_factory.mktemp("warmup") / "lake", episodes_per_task=1, steps=3)


def config(tiny_vlm, **settings) -> TrainConfig:
    base = {"policy": "vlm", "model_path": str(tiny_vlm), "run_id": "w", "history_length": 1,
            "sft_warmup_steps": 3, "sft_warmup_where": WHERE, "minibatch_size": 2,
            "micro_batch_size": 1, "engine": "torch", "generation": "transformers",
            "sft_warmup_lr": 3e-3, "tasks": 1, "group_size": 2, "iterations": 1,
            "max_steps": 1, "eval_repeats": 0, "max_new_tokens": 4}
    return TrainConfig(**{**base, **settings})


def _key(item: dict) -> tuple[str, list[str], list[bytes]]:
    return (json.dumps(item["messages"], sort_keys=True), item["image_sha256"],
            [image.convert("RGB").tobytes() for image in item["images"]])


class Spy:
    """Records every item the warm-up hands to the policy's loss."""

    def __init__(self, policy: VLMPolicy):
        self.items: list[dict] = []
        self.policy = policy
        self.module = policy.module

    def sft_loss(self, items):
        self.items += items
        return self.policy.sft_loss(items)


def _run(lake: Lake, cfg: TrainConfig, policy: VLMPolicy, run_id: str) -> warmup.WarmupResult:
    prepared = warmup.prepare(lake, cfg)
    assert prepared is not None
    engine = build_engine("torch", policy.module, lr=1.0, max_grad_norm=1.0,
                          deepspeed_config=cfg.deepspeed_config)
    return warmup.run(prepared, lake, policy, engine, cfg, run_id=run_id, progress=False)


def test_the_warmup_learns_from_exactly_the_datasets_samples(lake, tiny_vlm):
    expected = sorted(_key(item) for item in sft_dataset(lake, where=WHERE, history_images=1, seed=0))
    # one pass: as many steps of 2 as the dataset has samples / 2 (6 samples: 2 episodes x 3)
    cfg = config(tiny_vlm, sft_warmup_steps=len(expected) // 2)
    spy = Spy(VLMPolicy(tiny_vlm, history_length=1, generation="transformers"))
    result = _run(lake, cfg, spy, "same")  # type: ignore[arg-type]  # the policy, spied on
    assert sorted(_key(item) for item in spy.items) == expected
    assert result.samples == len(expected) and len(result.losses) == cfg.sft_warmup_steps


def test_a_dataset_item_is_scored_as_the_policy_scores_the_recorded_step(lake, tiny_vlm):
    """One way to build inputs: the dataset item's prompt and target are token for token the
    ones the policy builds from the recorded step when acting and learning online."""
    policy = VLMPolicy(tiny_vlm, history_length=1, generation="transformers")
    steps = lake.steps("ep-003").to_pylist()
    goal = lake.sql("SELECT task_goal FROM episodes WHERE episode_id = 'ep-003'")["task_goal"][0].as_py()
    for item in sft_dataset(lake, where="episode_id = 'ep-003'", history_images=1):
        step = item["step"]
        shown = [lake.image("ep-003", k)[0] for k in range(max(0, step - 1), step + 1)]
        online = policy.encode(goal, [s["model_response"] for s in steps[:step]], shown,
                               steps[step]["model_response"])
        from_item = policy.encode_item(item)
        assert from_item.input_ids.tolist() == online.input_ids.tolist()
        assert from_item.prompt_length == online.prompt_length
        assert from_item.image_grid_thw.tolist() == online.image_grid_thw.tolist()


def test_the_loss_goes_down_and_lands_in_runs_and_lineage(lake, tiny_vlm):
    cfg = config(tiny_vlm, sft_warmup_steps=4, sft_warmup_where="episode_id = 'ep-003'",
                 minibatch_size=3, micro_batch_size=3)
    result = _run(lake, cfg, VLMPolicy(tiny_vlm, history_length=1, generation="transformers"), "down")
    assert result.losses[-1] < result.losses[0] - 0.2, result.losses
    (row,) = lake.sql("SELECT iteration, kind, metrics FROM runs WHERE run_id = 'down'").to_pylist()
    assert (row["iteration"], row["kind"]) == (warmup.ITERATION, warmup.KIND)
    metrics = json.loads(row["metrics"])["sft_warmup"]
    assert metrics["losses"] == result.losses and metrics["steps"] == 4 and metrics["lr"] == 3e-3
    (lineage,) = lineage_of(lake, "down/sft-warmup")
    assert lineage["kind"] == "train" and lineage["run_id"] == "down"
    assert lineage["episode_ids"] == ["ep-003"] and lineage["counts"]["samples"] == 3
    assert lineage["selection"]["options"]["where"] == "episode_id = 'ep-003'"


def test_elake_train_runs_the_warmup_then_rl_and_a_resumed_run_skips_it(tmp_path, tiny_vlm, capsys,
                                                                        monkeypatch):
    path = tmp_path / "lake"
    build_lake(path, episodes_per_task=1, steps=2)
    code = main(["--lake", str(path), "train", "--policy", "vlm", "--model-path", str(tiny_vlm),
                 "--sft-warmup-steps", "2", "--sft-warmup-where", WHERE, "--sft-warmup-lr", "0.003",
                 "--tasks", "1", "--group-size", "2", "--iterations", "1", "--max-steps", "1",
                 "--eval-repeats", "0", "--max-new-tokens", "4", "--history-length", "1",
                 "--minibatch-size", "2", "--micro-batch-size", "2", "--engine", "torch",
                 "--generation", "transformers", "--run-id", "cli", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "sft warm-up: 2 step(s)" in out and "elake lineage cli/sft-warmup" in out
    lake = Lake(path)
    rows = lake.sql("SELECT iteration, kind FROM runs WHERE run_id = 'cli' ORDER BY 1").to_pylist()
    assert rows == [{"iteration": -1, "kind": "sft_warmup"}, {"iteration": 0, "kind": "train"}]
    (summary,) = [r for r in list_runs(lake) if r["run_id"] == "cli"]
    assert summary["iterations"] == 1 and summary["kind"] == "train"  # the warm-up is no iteration
    (warm,) = lineage_of(lake, "cli/sft-warmup")
    assert warm["episode_ids"] == ["ep-002", "ep-003"]  # task-2 and task-3
    (trained,) = lineage_of(lake, "iter-000000")  # the checkpoint counts the warm-up's episodes
    assert set(warm["episode_ids"]) < set(trained["episode_ids"])
    assert trained["counts"]["sft_warmup_episodes"] == 2

    # resumed, the run goes on from its checkpoint, which has the warmed-up weights
    def refuse(*args, **kwargs):
        raise AssertionError("the warm-up ran again")

    monkeypatch.setattr(warmup, "prepare", refuse)
    monkeypatch.setattr(warmup, "run", refuse)
    newest = checkpoint.latest(path / loop.CHECKPOINTS / "cli")
    assert newest is not None
    stored = TrainConfig.from_json(json.dumps(checkpoint.read_state(newest)["config"]))
    resumed = stored.model_copy(update={"iterations": 2, "resume": True})
    result = loop.train(resumed, Lake(path), progress=False)
    assert result.warmup is None and len(result.metrics) == 1
    assert len(lineage_of(Lake(path), "cli/sft-warmup")) == 1


@pytest.mark.parametrize(("settings", "error", "words"), [
    ({"sft_warmup_where": "task_name = 'no-such-task'"}, EmptySelection, "selects no step"),
    ({"sft_warmup_where": "no_such_column = 1"}, SqlRefused, "sft_warmup: --sft-warmup-where .*no_such_column"),
    ({"sft_warmup_where": None, "sft_warmup_set": "no-such-set"}, NotFound, "--sft-warmup-set 'no-such-set'"),
])
def test_a_bad_selection_is_one_error_before_the_model_loads(lake, tmp_path, settings, error, words):
    cfg = config(tmp_path / "not-loaded", **settings)
    with pytest.raises(error, match=words):
        loop.train(cfg, lake, progress=False)  # the model folder does not exist: never reached
    assert not lake.sql("SELECT * FROM lineage WHERE run_id = 'w'").num_rows
    assert not lake.sql("SELECT * FROM runs WHERE run_id = 'w'").num_rows


def test_warmup_settings_that_cannot_work_are_refused(tiny_vlm, tmp_path, capsys):
    with pytest.raises(ConfigError, match="--policy vlm only"):
        TrainConfig(sft_warmup_steps=2, sft_warmup_where=WHERE)
    with pytest.raises(ConfigError, match="--sft-warmup-set NAME or --sft-warmup-where"):
        config(tiny_vlm, sft_warmup_where=None)
    with pytest.raises(ConfigError, match="give --sft-warmup-steps"):
        config(tiny_vlm, sft_warmup_steps=0)
    assert main(["--lake", str(tmp_path / "lake"), "train", "--sft-warmup-steps", "2",
                 "--sft-warmup-where", WHERE]) == 1
    assert "--policy vlm only" in capsys.readouterr().err
