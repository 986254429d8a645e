"""Ray actors recording into a lake on S3 (moto's server on loopback), one actor killed
mid-episode, then the bulk export from that lake on Ray: what a multi-node run does, on
one machine. The cluster starts after the S3 variables are set, so its workers have them
as workers on other nodes would."""

from __future__ import annotations

import sys

import pytest
import ray_cluster as support
from test_export import tree
from test_ray_collect import TASKS, assert_complete, steps_per_episode

from episodelake.collectors.envs.base import Task
from episodelake.collectors.jobs.batch import RunSettings, SimSpec, run_batch
from episodelake.collectors.jobs.bulk import RayOptions, export_prepare
from episodelake.lake import Lake
from episodelake.lake.export import ExportSpec, run_export

pytestmark = [support.needs_ray, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:lance is not fork-safe")]


@pytest.fixture
def ray_on_s3(s3_lake):
    import ray

    ray.shutdown()  # a cluster of another module started without the S3 variables
    ray.cloudpickle.register_pickle_by_value(sys.modules[support.__name__])
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    try:
        yield s3_lake
    finally:
        ray.shutdown()


def test_actors_record_into_s3_and_export_on_ray(ray_on_s3, tmp_path):
    uri = ray_on_s3
    crash = Task("wifi_on", seed=support.CRASH_SEED)
    workers = [(SimSpec(0, f"sim-{i}"), support.CrashingOracle()) for i in range(2)]
    report = run_batch(uri, workers, [TASKS[0], crash, *TASKS[1:4]],
                       RunSettings("ray-s3", max_steps=12), backend="ray")
    assert report.lost_tasks == [crash] and len(report.stopped_workers) == 1
    assert len(report.episodes) == 4

    lake = Lake(uri)
    assert_complete(lake, report.episodes)
    lake.recover()  # the dead actor's spool is on this node (ELAKE_SPOOL)
    stored = steps_per_episode(lake)
    assert len(stored) == 5
    assert [s for e, s in stored.items() if e not in {x.episode_id for x in report.episodes}] == [[0]]
    assert lake.sql("SELECT episode_id, step FROM steps GROUP BY ALL HAVING count(*) > 1").num_rows == 0

    spec = {"format": "llamafactory", "relative_paths": True, "max_pixels": 20000}
    run_export(lake, ExportSpec(out=tmp_path / "here", **spec))
    run_export(lake, ExportSpec(out=tmp_path / "ray", **spec),
               prepare=export_prepare(RayOptions(ray=True)))
    assert tree(tmp_path / "ray") == tree(tmp_path / "here")
