"""Collectors as Ray actors writing straight into one lake: every step of every episode
exactly once from several actors; an actor killed mid-episode is reported with its tasks and
costs nobody else a row; the trainer's rollouts on Ray actors."""

from __future__ import annotations

import pytest

from episodelake.collectors.envs.base import Task
from episodelake.collectors.jobs.batch import OracleSpec, RunSettings, SimSpec, run_batch
from episodelake.lake import Lake
from tests.factories import needs_ray
from tests.remote.ray_cluster import CRASH_SEED, CrashingOracle, ray_cluster  # noqa: F401

pytestmark = [needs_ray, pytest.mark.slow, pytest.mark.usefixtures("ray_cluster"),
              pytest.mark.filterwarnings("ignore:lance is not fork-safe")]  # Ray forks its workers

TASKS = [Task("wifi_on", seed=1), Task("bluetooth_on", seed=2), Task("wifi_off", seed=3),
         Task("bluetooth_off", seed=4), Task("wifi_on", group_id="g", seed=5),
         Task("wifi_on", group_id="g", seed=6)]


def steps_per_episode(lake: Lake) -> dict[str, list[int]]:
    rows = lake.sql("SELECT episode_id, list(step ORDER BY step) AS steps FROM steps GROUP BY 1")
    return dict(zip(rows["episode_id"].to_pylist(), rows["steps"].to_pylist(), strict=True))


def assert_complete(lake: Lake, episodes) -> None:
    """Each reported episode is stored once, finished, with steps 0..n-1 exactly once."""
    stored = steps_per_episode(lake)
    rows = {r["episode_id"]: r for r in lake.sql(
        "SELECT episode_id, status, episode_length FROM episodes").to_pylist()}
    for summary in episodes:
        assert stored[summary.episode_id] == list(range(summary.steps))
        assert rows[summary.episode_id]["status"] == "finished"
        assert rows[summary.episode_id]["episode_length"] == summary.steps


def test_actors_write_one_lake_exactly_once(lake):
    workers = [(SimSpec(0, f"sim-{i}"), OracleSpec()) for i in range(2)]
    report = run_batch(lake, workers, TASKS, RunSettings("ray-ok", max_steps=12), backend="ray")
    assert len(report.episodes) == len(TASKS) and not report.stopped_workers
    assert_complete(lake, report.episodes)
    assert lake.sql("SELECT count(*) AS n FROM episodes")["n"][0].as_py() == len(TASKS)
    devices = lake.sql("SELECT DISTINCT device FROM episodes")["device"].to_pylist()
    assert sorted(devices) == ["sim-0", "sim-1"]  # both actors wrote
    assert report.commits >= 2
    groups = lake.sql("SELECT count(DISTINCT device) AS n FROM episodes WHERE group_id = 'g'")
    assert groups["n"][0].as_py() == 1  # a group meets one actor (one anchor keyer)


def test_a_killed_actor_is_reported_and_the_others_rows_are_intact(lake):
    crash = Task("wifi_on", seed=CRASH_SEED)
    tasks = [TASKS[0], crash, *TASKS[1:4]]
    workers = [(SimSpec(0, f"sim-{i}"), CrashingOracle()) for i in range(2)]
    report = run_batch(lake, workers, tasks, RunSettings("ray-kill", max_steps=12), backend="ray")

    assert len(report.stopped_workers) == 1
    line = report.stopped_workers[0]
    assert "lost" in line and "1 task(s) (wifi_on)" in line and "elake recover" in line
    assert report.lost_tasks == [crash]
    assert len(report.episodes) == 4  # the survivor ran everything else
    assert_complete(lake, report.episodes)

    # the dead actor acknowledged step 0 of its episode: replayed from its spool, once
    lake.recover()
    lost = set(steps_per_episode(lake)) - {e.episode_id for e in report.episodes}
    assert len(lost) == 1
    assert steps_per_episode(lake)[lost.pop()] == [0]
    dupes = lake.sql("SELECT episode_id, step FROM steps GROUP BY ALL HAVING count(*) > 1")
    assert dupes.num_rows == 0
    assert_complete(lake, report.episodes)


def test_trainer_rollouts_on_ray_actors(lake):
    from episodelake.trainer import loop
    from episodelake.trainer.config import TrainConfig

    config = TrainConfig(tasks=2, group_size=2, iterations=1, max_steps=3, eval_repeats=0,
                         run_id="ray-train", minibatch_size=8, micro_batch_size=4, workers=2,
                         rollout_backend="ray")
    result = loop.train(config, lake, progress=False)
    assert len(result.metrics) == 1
    rows = lake.sql("SELECT count(*) AS n, count(DISTINCT group_id) AS g, count(DISTINCT device) "
                    "AS d FROM episodes WHERE run_id = 'ray-train'").to_pylist()[0]
    assert rows["n"] == 4 and rows["g"] == 2
    dupes = lake.sql("SELECT episode_id, step FROM steps GROUP BY ALL HAVING count(*) > 1")
    assert dupes.num_rows == 0
