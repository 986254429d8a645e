"""Parallel collectors into one lake: every step of every episode arrives exactly once, with
threads and with Ray actors; a worker whose device is gone hands its task to the others;
groups are split into units the way anchor keys need."""

from __future__ import annotations

import pytest

from episodelake.collectors.envs.base import Task
from episodelake.collectors.envs.remote import RemoteOptions
from episodelake.collectors.jobs import batch
from episodelake.collectors.loop import EpisodeSummary
from episodelake.lake.storage.errors import DeviceUnavailable, InvalidInput
from tests.collectors.device_support import elake
from tests.factories import needs_ray

TASKS = [Task("wifi_on"), Task("bluetooth_on"), Task("wifi_off"), Task("bluetooth_off"),
         Task("wifi_on", group_id="g"), Task("wifi_on", group_id="g")]


def assert_exactly_once(lake, report, n_episodes: int) -> None:
    assert len(report.episodes) == n_episodes
    dupes = lake.sql("SELECT episode_id, step, count(*) AS n FROM steps GROUP BY 1, 2 HAVING n > 1")
    assert dupes.num_rows == 0
    rows = lake.sql("""
        SELECT e.episode_id, e.status, e.episode_length, count(s.step) AS n, min(s.step) AS lo,
               max(s.step) AS hi
        FROM episodes e LEFT JOIN steps s USING (episode_id) GROUP BY ALL""").to_pylist()
    assert len(rows) == n_episodes
    by_id = {r["episode_id"]: r for r in rows}
    for summary in report.episodes:
        row = by_id[summary.episode_id]
        assert row["status"] == "finished"
        assert row["n"] == row["episode_length"] == summary.steps
        assert (row["lo"], row["hi"]) == (0, summary.steps - 1)


def test_threads(lake):
    workers = [(batch.SimSpec(0, f"sim-{i}"), batch.OracleSpec()) for i in range(3)]
    report = batch.run_batch(lake.path, workers, TASKS, batch.RunSettings("par", max_steps=12))
    assert_exactly_once(lake, report, len(TASKS))
    assert all(e.success for e in report.episodes)
    devices = lake.sql("SELECT DISTINCT device FROM episodes")["device"].to_pylist()
    assert len(devices) > 1 and report.commits >= 3


def test_a_worker_without_a_device_hands_its_tasks_over(lake):
    dead = batch.RemoteSpec(("http://127.0.0.1:9",), RemoteOptions(retry_wait_s=0.01))
    workers = [(dead, batch.RandomSpec()), (batch.SimSpec(0), batch.OracleSpec())]
    report = batch.run_batch(lake.path, workers, TASKS[:3], batch.RunSettings("par", max_steps=12))
    assert len(report.episodes) == 3 and len(report.stopped_workers) == 1
    assert "no environment server could start" in report.stopped_workers[0]
    with pytest.raises(DeviceUnavailable, match="every worker stopped with 2 task"):
        batch.run_batch(lake.path, [(dead, batch.RandomSpec())], TASKS[:2], batch.RunSettings("x"))


def test_process_and_ray_workers_take_whole_groups_threads_take_tasks():
    tasks = [Task("a", group_id="g1"), Task("b"), Task("c", group_id="g2"), Task("d", group_id="g1")]
    assert batch.work_units(tasks, by_group=True) == [[tasks[0], tasks[3]], [tasks[1]], [tasks[2]]]
    assert batch.work_units(tasks, by_group=False) == [[t] for t in tasks]


def test_server_split_and_bad_backends():
    specs = batch.split_servers([f"http://s{i}" for i in range(5)], 2)
    assert [s.urls for s in specs] == [("http://s0", "http://s2", "http://s4"), ("http://s1", "http://s3")]
    with pytest.raises(InvalidInput, match="3 workers need at least 3 server entries"):
        batch.split_servers(["http://a", "http://b"], 3)
    with pytest.raises(InvalidInput, match="backend"):
        batch.run_batch("x", [(batch.SimSpec(), batch.OracleSpec())], [], batch.RunSettings("x"), backend="mpi")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:lance is not fork-safe")  # Ray starts its workers itself
@needs_ray
def test_ray_actors_through_the_command_line(lake, capsys):
    import ray
    argv = ["--lake", str(lake.path), "collect", "sim", "--policy", "oracle", "--workers", "2",
            "--ray", "--max-steps", "12", "--run-id", "ray1"]
    for task in TASKS[:4]:
        argv += ["--task", task.name]
    try:
        assert elake(argv) == 0
    finally:
        ray.shutdown()
    assert "4 finished; 4 successful" in capsys.readouterr().out
    lake.invalidate()
    summaries = lake.sql("SELECT episode_id, episode_length AS steps FROM episodes").to_pylist()
    report = batch.BatchReport([EpisodeSummary(r["episode_id"], "", "finished", r["steps"])
                             for r in summaries])
    assert_exactly_once(lake, report, 4)
    assert len(lake.sql("SELECT DISTINCT device FROM episodes")) == 2
