"""Episode groups as the lake stores them (`lake.ops.episode_groups`), on a real lake recorded
through the Recorder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.ops import episode_groups
from episodelake.lake.storage.errors import InvalidInput
from tests.factories import response, screenshot

T0 = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    """g-old: two episodes of t1 (one a success, reward 1), g-new: one failed episode of t2
    recorded later, and an episode in no group."""
    lake = Lake(tmp_path_factory.mktemp("groups") / "lake")
    with Recorder(lake, anchor=None) as rec:
        for n, (episode_id, task, group, success) in enumerate([
                ("a-1", "t1", "g-old", True), ("a-0", "t1", "g-old", False),
                ("c-0", "t2", "g-new", False), ("solo", "t1", None, True)]):
            with rec.start_episode(task, "goal", episode_id=episode_id, group_id=group,
                                   created_at=T0 + timedelta(minutes=n)) as ep:
                for k in range(2):
                    ep.log_step(screenshot(10 * n + k), response("click"), reward=float(success and k == 1),
                                step_reward=0.5)
                ep.finish(success=success, eval_score=float(success), episode_reward=float(success))
    lake.invalidate()
    return lake


def test_group_summaries_newest_first_with_outcomes(lake):
    rows = episode_groups.group_summaries(lake, "TRUE", [], 10)
    assert rows == [
        {"group_id": "g-new", "task_name": "t2", "episodes": 1, "successes": 0, "mean_reward": 0.0},
        {"group_id": "g-old", "task_name": "t1", "episodes": 2, "successes": 1, "mean_reward": 0.5},
    ]
    assert [r["group_id"] for r in episode_groups.group_summaries(lake, "e.task_name = ?", ["t1"], 10)] == ["g-old"]
    assert [r["group_id"] for r in episode_groups.group_summaries(lake, "TRUE", [], 1)] == ["g-new"]


def test_group_episodes_and_steps_in_order(lake):
    assert [e["episode_id"] for e in episode_groups.group_episodes(lake, "g-old")] == ["a-0", "a-1"]
    assert episode_groups.group_episodes(lake, "g-none") == []
    steps = episode_groups.group_steps(lake, "g-old")
    assert [(s["episode_id"], s["step"]) for s in steps] == [("a-0", 0), ("a-0", 1), ("a-1", 0), ("a-1", 1)]
    assert set(steps[0]) == {"episode_id", "step", "anchor_key", "action_type", "reward", "step_reward"}
    assert [s["reward"] for s in steps] == [0.0, 0.0, 0.0, 1.0] and steps[0]["action_type"] == "click"


def test_advantage_inputs_are_the_groups_rows_with_the_columns_asked(lake):
    episodes, steps = episode_groups.advantage_inputs(lake, "g-old", ("episode_id", "group_id", "eval_score"),
                                                      ("episode_id", "step", "reward"))
    assert episodes.column_names == ["episode_id", "group_id", "eval_score"]
    assert sorted(episodes.column("episode_id").to_pylist()) == ["a-0", "a-1"]
    assert steps.column_names == ["episode_id", "step", "reward"] and steps.num_rows == 4
    with pytest.raises(InvalidInput, match="steps has no column bogus"):
        episode_groups.advantage_inputs(lake, "g-old", ("episode_id",), ("episode_id", "bogus"))
