"""TrainConfig: defaults, the conflicts it refuses (naming the fix), and its CLI flags."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from episodelake.lake.errors import LakeError
from episodelake.trainer.config import (
    REFERENCE_ADVANTAGES,
    ConfigError,
    TrainConfig,
    add_arguments,
    from_arguments,
)


def test_defaults_depend_on_the_policy(tmp_path):
    tiny = TrainConfig()
    assert (tiny.lr, tiny.threads, tiny.clip_eps_high, tiny.entropy_coef) == (3e-3, 1, 1.0, 0.01)
    (tmp_path / "config.json").write_text("{}")
    vlm = TrainConfig(policy="vlm", model_path=str(tmp_path))
    assert (vlm.lr, vlm.threads, vlm.clip_eps_high, vlm.entropy_coef) == (1e-6, 0, 0.28, 0.001)
    assert TrainConfig(entropy_coef=0.0).entropy_coef == 0.0  # an explicit 0 is kept


@pytest.mark.parametrize(("settings", "names"), [
    ({"group_size": 1}, "--group-size 2"),
    ({"policy": "vlm"}, "--model-path"),
    ({"model_path": "/models/qwen"}, "--policy vlm"),
    ({"policy": "vlm", "model_path": "/m", "workers": 2}, "--workers 1"),
    ({"generation": "vllm"}, "vlm"),
    ({"minibatch_size": 64, "micro_batch_size": 48}, "--minibatch-size"),
    ({"resume": True}, "--run-id"),
    ({"holdout": 0.0}, "--eval-repeats 0"),
    ({"algo": "ppo"}, "gigpo"),
    ({"gamma": 1.5}, "[0, 1]"),
    ({"clip_eps": 0.3, "clip_eps_high": 0.2}, "--clip-eps"),
    ({"tasks": 0}, ">= 1"),
])
def test_conflicts_are_refused_with_the_fix(settings, names):
    with pytest.raises(ConfigError) as caught:
        TrainConfig(**settings)
    assert names in str(caught.value)
    assert isinstance(caught.value, LakeError)  # the CLI prints it as one line


def test_flags_round_trip_to_the_defaults():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert from_arguments(parser.parse_args([])) == TrainConfig()
    args = parser.parse_args(["--algo", "grpo", "--group-size", "4", "--no-step-rewards",
                              "--lr", "0.01"])
    config = from_arguments(args)
    assert (config.algo, config.group_size, config.step_rewards, config.lr) == \
        ("grpo", 4, False, 0.01)


def test_every_field_documents_itself():
    for f in dataclasses.fields(TrainConfig):
        assert len(f.metadata.get("help", "")) > 10, f.name


def test_json_round_trip():
    config = TrainConfig(algo="grpo", tasks=3)
    assert TrainConfig.from_json(config.to_json()) == config
    with pytest.raises(ConfigError, match="unknown setting"):
        TrainConfig.from_json('{"taks": 3}')


# -- the advantage settings: tuned defaults or the reference's -------------------------------------
def test_tuned_advantage_defaults_and_the_reference_set():
    tuned = TrainConfig()
    assert (tuned.normalize_step_rewards, tuned.revisit_rewards) == (False, False)
    assert tuned.advantage_summary().startswith("advantages: tuned defaults (")
    assert "normalize_step_rewards=False" in tuned.advantage_summary()
    reference = TrainConfig(reference_defaults=True)
    options = reference.advantage_options()
    # exactly compute_advantages' own defaults, which are the reference trainer's
    assert {k: options[k] for k in REFERENCE_ADVANTAGES} == REFERENCE_ADVANTAGES
    assert (reference.normalize_step_rewards, reference.revisit_rewards) == (True, True)
    assert reference.advantage_summary().startswith("advantages: reference defaults (")
    assert "revisit_rewards=True" in reference.advantage_summary()
    assert TrainConfig(gamma=0.9).advantage_summary().startswith("advantages: custom settings")
    assert TrainConfig(normalize_step_rewards=True).normalize_step_rewards is True  # explicit wins
    assert TrainConfig.from_json(reference.to_json()) == reference


@pytest.mark.parametrize(("settings", "names"), [
    ({"revisit_rewards": False}, "drop --no-revisit-rewards or --reference-defaults"),
    ({"normalize_step_rewards": False}, "--normalize-step-rewards"),
    ({"gamma": 0.9}, "(--gamma 0.95), not with 0.9"),
    ({"mode": "mean_std_norm"}, "--mode"),
    ({"dynamic_sampling": True}, "--no-dynamic-sampling"),
])
def test_reference_defaults_refuse_a_setting_that_changes_the_equations(settings, names):
    with pytest.raises(ConfigError) as caught:
        TrainConfig(reference_defaults=True, **settings)
    assert names in str(caught.value)


def test_reference_defaults_flag():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert from_arguments(parser.parse_args(["--reference-defaults"])) == TrainConfig(reference_defaults=True)
    config = from_arguments(parser.parse_args(["--normalize-step-rewards"]))
    assert (config.normalize_step_rewards, config.revisit_rewards) == (True, False)
    assert from_arguments(parser.parse_args(["--no-revisit-rewards"])).revisit_rewards is False
