"""TrainConfig: defaults, the conflicts it refuses (naming the fix), and the settings its CLI
flags give (`TrainConfig.from_settings`; the flags themselves: tests/api/test_cli_options.py)."""

from __future__ import annotations

import pytest

from episodelake.lake.storage.errors import EpisodeLakeError
from episodelake.trainer.advantages import (
    REFERENCE_ADVANTAGES,
    TUNED_ADVANTAGES,
    AdvantageConfig,
    compute_advantages,
)
from episodelake.trainer.config import ConfigError, TrainConfig
from episodelake.trainer.reference_advantages import reference_advantages


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
    ({"advantages": {"algo": "ppo"}}, "algo: input should be 'gigpo' or 'grpo', not 'ppo'"),
    ({"advantages": {"gamma": 1.5}}, "gamma: input should be less than or equal to 1"),
    ({"clip_eps": 0.3, "clip_eps_high": 0.2}, "--clip-eps"),
    ({"tasks": 0}, "tasks: input should be greater than or equal to 1, not 0"),
    ({"gamma": 0.9}, "gamma: no such setting"),  # advantage settings live in `advantages`
])
def test_conflicts_are_refused_with_the_fix(settings, names):
    with pytest.raises(ConfigError) as caught:
        TrainConfig(**settings)
    assert names in str(caught.value)
    assert isinstance(caught.value, EpisodeLakeError)  # the CLI prints it as one line


def test_flags_round_trip_to_the_defaults():
    assert TrainConfig.from_settings({}) == TrainConfig()
    config = TrainConfig.from_settings({"algo": "grpo", "group_size": 4, "step_rewards": False,
                                        "lr": 0.01, "gamma": 0.9})
    assert (config.advantages.algo, config.group_size, config.step_rewards, config.lr) == \
        ("grpo", 4, False, 0.01)
    assert config.advantages == TUNED_ADVANTAGES.replace(algo="grpo", gamma=0.9)


def test_every_setting_documents_itself():
    for model in (TrainConfig, AdvantageConfig):
        for name, field in model.model_fields.items():
            assert len(field.description or "") > 10, name
    config = TrainConfig()
    assert TrainConfig.from_settings(config.settings()) == config  # every setting by its flag's name


def test_json_round_trip():
    config = TrainConfig(advantages=AdvantageConfig(algo="grpo"), tasks=3)
    assert TrainConfig.from_json(config.to_json()) == config
    with pytest.raises(ConfigError, match="unknown setting"):
        TrainConfig.from_json('{"taks": 3}')


def test_a_config_stored_with_flat_advantage_settings_reads_the_same():
    """Runs and checkpoints recorded before the settings were nested still resume."""
    stored = ('{"algo": "grpo", "gamma": 0.9, "normalize_step_rewards": true, "revisit_rewards": '
              'true, "reference_defaults": false, "tasks": 3, "lr": 0.003}')
    config = TrainConfig.from_json(stored)
    assert config.tasks == 3
    assert config.advantages == REFERENCE_ADVANTAGES.replace(algo="grpo", gamma=0.9)


# -- the advantage settings: tuned defaults or the reference's -------------------------------------
def test_advantage_defaults_are_defined_once():
    """AdvantageConfig's defaults are the trainer's (no second set in TrainConfig or in
    compute_advantages); the reference set differs from them in exactly two named settings."""
    assert TrainConfig().advantages == AdvantageConfig() == TUNED_ADVANTAGES
    assert TrainConfig.model_fields["advantages"].default is TUNED_ADVANTAGES
    assert compute_advantages.__defaults__ == (TUNED_ADVANTAGES,)
    assert reference_advantages.__defaults__ == (REFERENCE_ADVANTAGES,)
    differ = {k for k, v in REFERENCE_ADVANTAGES.model_dump().items()
              if v != getattr(TUNED_ADVANTAGES, k)}
    assert differ == {"normalize_step_rewards", "revisit_rewards"}
    assert (REFERENCE_ADVANTAGES.normalize_step_rewards, REFERENCE_ADVANTAGES.revisit_rewards) == \
        (True, True)


def test_tuned_advantage_defaults_and_the_reference_set():
    tuned = TrainConfig()
    assert (tuned.advantages.normalize_step_rewards, tuned.advantages.revisit_rewards) == (False, False)
    assert tuned.advantage_summary().startswith("advantages: tuned defaults (")
    assert "normalize_step_rewards=False" in tuned.advantage_summary()
    reference = TrainConfig(advantages=REFERENCE_ADVANTAGES)
    assert reference.advantage_summary().startswith("advantages: reference defaults (")
    assert "revisit_rewards=True" in reference.advantage_summary()
    custom = TrainConfig(advantages=TUNED_ADVANTAGES.replace(gamma=0.9))
    assert custom.advantage_summary().startswith("advantages: custom settings")
    assert TrainConfig.from_json(reference.to_json()) == reference


def reference(**given) -> TrainConfig:
    return TrainConfig.from_settings(given, reference_defaults=True)


@pytest.mark.parametrize(("given", "names"), [
    ({"revisit_rewards": False}, "drop --no-revisit-rewards or --reference-defaults"),
    ({"normalize_step_rewards": False}, "--normalize-step-rewards"),
    ({"gamma": 0.9}, "(--gamma 0.95), not with 0.9"),
    ({"mode": "mean_std_norm"}, "--mode"),
    ({"dynamic_sampling": True}, "--no-dynamic-sampling"),
])
def test_reference_defaults_refuse_a_setting_that_changes_the_equations(given, names):
    with pytest.raises(ConfigError) as caught:
        reference(**given)
    assert names in str(caught.value)


def test_reference_defaults_flag():
    assert reference() == TrainConfig(advantages=REFERENCE_ADVANTAGES)
    assert reference(gamma=0.95).advantages == REFERENCE_ADVANTAGES
    config = TrainConfig.from_settings({"normalize_step_rewards": True})
    assert (config.advantages.normalize_step_rewards, config.advantages.revisit_rewards) == (True, False)
    assert TrainConfig.from_settings({"revisit_rewards": False}).advantages.revisit_rewards is False
