"""Ray actors recording into a lake on S3 (moto's server on loopback), one actor killed
mid-episode, then the bulk export from that lake on Ray: what a multi-node run does, on
one machine. The cluster starts after the S3 variables are set, so its workers have them
as workers on other nodes would."""

from __future__ import annotations

import os
import sys

import pytest

from episodelake.collectors.envs.base import Task
from episodelake.collectors.jobs.batch import OracleSpec, RunSettings, SimSpec, run_batch
from episodelake.collectors.jobs.bulk import RayOptions, export_prepare
from episodelake.lake import Lake
from episodelake.lake.export import ExportSpec, run_export
from tests.factories import needs_ray
from tests.lake.export.test_export import tree
from tests.remote import ray_cluster as support
from tests.remote.s3_server import ACCESS_KEY, REGION, SECRET_KEY
from tests.remote.test_ray_collect import TASKS, assert_complete, steps_per_episode

pytestmark = [needs_ray, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:lance is not fork-safe")]


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


@pytest.fixture
def ray_without_aws(s3_server, monkeypatch, tmp_path):
    """A fresh bucket and a local cluster whose processes have no AWS_* variable: the lake
    is reachable only through the storage options the driver gives explicitly."""
    import ray

    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("ELAKE_LAKE", raising=False)
    monkeypatch.setenv("ELAKE_SPOOL", str(tmp_path / "spool"))
    options = {"aws_endpoint": s3_server.endpoint, "aws_access_key_id": ACCESS_KEY,
               "aws_secret_access_key": SECRET_KEY, "aws_region": REGION, "allow_http": "true"}
    ray.shutdown()
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    try:
        yield f"s3://{s3_server.new_bucket()}/lake", options
    finally:
        ray.shutdown()


def _aws_variables() -> list[str]:
    return sorted(n for n in os.environ if n.startswith("AWS_"))


def test_actors_reach_the_lake_through_explicit_storage_options(ray_without_aws, s3_server):
    import ray

    uri, options = ray_without_aws
    assert ray.get(ray.remote(_aws_variables).remote()) == []  # the workers know no store
    lake = Lake(uri, storage_options=options)
    assert SECRET_KEY not in repr(lake.location) + str(lake.location)
    workers = [(SimSpec(0, f"sim-{i}"), OracleSpec()) for i in range(2)]
    report = run_batch(lake, workers, TASKS[:4], RunSettings("ray-options", max_steps=12), backend="ray")
    assert len(report.episodes) == 4 and not report.stopped_workers
    assert_complete(lake, report.episodes)
    assert sorted(lake.sql("SELECT DISTINCT device FROM episodes")["device"].to_pylist()) == ["sim-0", "sim-1"]

    # the credentials are nowhere in what the lake stores
    bucket = uri.split("/")[2]
    client = s3_server.client()
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])]
    assert keys and not any(SECRET_KEY.encode() in client.get_object(Bucket=bucket, Key=k)["Body"].read()
                            for k in keys)
