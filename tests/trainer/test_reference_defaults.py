"""`elake train --reference-defaults`: the trainer's advantages are then the reference's equations,
checked against the plain-Python specification on a lake of real sim rollouts; the tuned
defaults differ from them; training says which set it uses."""

from __future__ import annotations

import math

import pytest

from episodelake.api.cli import main
from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts, task_ids
from episodelake.trainer import loop
from episodelake.trainer.advantages import REFERENCE_ADVANTAGES
from episodelake.trainer.config import TrainConfig
from episodelake.trainer.reference_advantages import reference_advantages

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory):
    """Demo-policy episodes in groups: detours, loops back to seen screens, failures, judged steps."""
    from episodelake.lake import Lake

    lake = Lake(tmp_path_factory.mktemp("reference") / "lake")
    spec = RolloutSpec(task_ids=task_ids(4, seed=3), group_size=4, max_steps=8, run_id="ref",
                       image_checks="structure")
    report = run_rollouts(lake, spec, demo_agent("demo"), progress=False)
    return lake, report


def advantages(lake, report, config: TrainConfig) -> dict:
    result = loop.step_advantages(lake, report, config, history_length=0).advantages
    return {(r["episode_id"], r["step"]): r["advantage"] for r in result.table.to_pylist()}


def test_reference_defaults_are_the_reference_equations(rollouts):
    lake, report = rollouts
    episodes, steps = lake.episode_batch([e.episode_id for e in report.episodes])
    steps = steps.to_pylist()
    assert len({s["anchor_key"] for s in steps}) < len(steps)  # shared anchor states: a real test
    assert any(s["step_reward"] for s in steps)
    ours = advantages(lake, report, TrainConfig(advantages=REFERENCE_ADVANTAGES))
    expected = {(r["episode_id"], r["step"]): r["advantage"]
                for r in reference_advantages(episodes.to_pylist(), steps)}  # its defaults
    assert ours.keys() == expected.keys() and len(ours) == len(steps)
    for key, value in expected.items():
        assert math.isclose(ours[key], value, rel_tol=1e-9, abs_tol=1e-12), key
    # the tuned defaults are other equations: they give other advantages on the same steps
    tuned = advantages(lake, report, TrainConfig())
    assert max(abs(tuned[key] - value) for key, value in expected.items()) > 1e-3


def test_training_prints_which_advantage_set_it_uses(tmp_path, capsys):
    base = ["--lake", str(tmp_path / "lake"), "train", "--tasks", "1", "--group-size", "2",
            "--iterations", "1", "--max-steps", "2", "--eval-repeats", "0", "--no-progress"]
    assert main([*base, "--run-id", "tuned"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("advantages: tuned defaults (") and "normalize_step_rewards=False" in first
    assert main([*base, "--run-id", "reference", "--reference-defaults"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("advantages: reference defaults (") and "revisit_rewards=True" in first
    assert main([*base, "--run-id", "x", "--reference-defaults", "--no-revisit-rewards"]) == 1
    assert "drop --no-revisit-rewards or --reference-defaults" in capsys.readouterr().err
