"""Numbers over the episodes a filter selects (`lake.ops.episode_stats`), on a real lake
recorded through the Recorder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.ops import episode_stats
from tests.factories import response, screenshot

T0 = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    """t1: a success of 2 steps (policy 9) and a failure of 4 (policy 10); t2: an unjudged
    episode of 3 steps (policy 10). Step rewards 0, 0.5, 0.5 by step, none at step 2."""
    lake = Lake(tmp_path_factory.mktemp("stats") / "lake")
    with Recorder(lake, anchor=None, run_id="r") as rec:
        for n, (task, steps, success, version) in enumerate([("t1", 2, True, "9"), ("t1", 4, False, "10"),
                                                               ("t2", 3, None, "10")]):
            with rec.start_episode(task, f"goal {task}", episode_id=f"e-{n}", policy_version=version,
                                   created_at=T0 + timedelta(minutes=n)) as ep:
                for k in range(steps):
                    ep.log_step(screenshot(10 * n + k), response("click"),
                                step_reward=None if k == 2 else min(k, 1) * 0.5)
                if success is None:
                    ep.finish()
                else:
                    ep.finish(success=success)
    lake.invalidate()
    return lake


def test_task_summaries(lake):
    rows = {r["task_name"]: r for r in episode_stats.task_summaries(lake, "TRUE", [])}
    assert list(rows) == ["t1", "t2"]
    assert rows["t1"] == {"task_name": "t1", "task_goal": "goal t1", "episodes": 2, "successes": 1, "failures": 1,
                          "unjudged": 0, "success_rate": 0.5, "mean_length": 3.0}
    assert rows["t2"]["unjudged"] == 1 and rows["t2"]["success_rate"] is None
    assert [r["task_name"] for r in episode_stats.task_summaries(lake, "e.task_name = ?", ["t2"])] == ["t2"]


def test_success_cells_order_versions_as_numbers(lake):
    cells = episode_stats.success_cells(lake, "TRUE", [])
    assert [(c["task_name"], c["policy_version"], c["episodes"], c["judged"], c["successes"]) for c in cells] == [
        ("t1", "9", 1, 1, 1), ("t1", "10", 1, 1, 0), ("t2", "10", 1, 0, 0)]


def test_step_reward_totals_count_the_unjudged_steps(lake):
    assert episode_stats.step_reward_totals(lake, "TRUE", []) == {"steps": 9, "nulls": 2}
    assert episode_stats.step_reward_totals(lake, "e.task_name = ?", ["t1"]) == {"steps": 6, "nulls": 1}


def test_step_reward_histogram_bins_the_judged_steps(lake):
    bins = episode_stats.step_reward_histogram(lake, "TRUE", [], 2)  # three 0s, four 0.5s
    assert bins == [{"lo": 0.0, "hi": 0.25, "count": 3}, {"lo": 0.25, "hi": 0.5, "count": 4}]


def test_length_histogram_has_one_bin_per_length_when_few(lake):
    bins = episode_stats.length_histogram(lake, "TRUE", [], 40)
    assert [(b["lo"], b["count"]) for b in bins] == [(2.0, 1), (3.0, 1), (4.0, 1)]
    wide = episode_stats.length_histogram(lake, "TRUE", [], 2)
    assert [(b["lo"], b["hi"], b["count"]) for b in wide] == [(2.0, 4.0, 2), (4.0, 6.0, 1)]


def test_histogram_of_nothing_is_empty(lake):
    assert episode_stats.length_histogram(lake, "e.task_name = ?", ["none"], 10) == []
    assert episode_stats.histogram(lake, "SELECT 1.0 AS v WHERE false", [], 5) == []
