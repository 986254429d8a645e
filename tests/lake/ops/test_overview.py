"""The landing page's whole-lake numbers (`lake.ops.overview`), on a real lake recorded through
the Recorder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.ops import overview
from tests.factories import response, screenshot

T0 = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    """run-a: versions 9 (a success) and 10 (a failure), recorded first; run-b: version 10 (a
    success, 2 steps) and an episode naming no version, recorded last."""
    lake = Lake(tmp_path_factory.mktemp("overview") / "lake")
    with Recorder(lake, anchor=None) as rec:
        for n, (run, version, success, steps) in enumerate([("run-a", "9", True, 1), ("run-a", "10", False, 1),
                                                             ("run-b", "10", True, 2), ("run-b", None, False, 1)]):
            with rec.start_episode("t", "goal", episode_id=f"e-{n}", run_id=run, policy_version=version,
                                   created_at=T0 + timedelta(minutes=n)) as ep:
                for k in range(steps):
                    ep.log_step(screenshot(10 * n + k), response("click"))
                ep.finish(success=success)
    lake.invalidate()
    return lake


def test_lake_counts(lake):
    assert overview.lake_counts(lake) == {"episodes": 4, "steps": 5}


def test_success_by_policy_keeps_runs_apart_and_orders_versions_as_numbers(lake):
    rows = overview.success_by_policy(lake)
    assert [(r["run_id"], r["policy_version"], r["episodes"], r["successes"], r["success_rate"]) for r in rows] == [
        ("run-a", "9", 1, 1, 1.0), ("run-a", "10", 1, 0, 0.0), ("run-b", "10", 1, 1, 1.0), ("run-b", None, 1, 0, 0.0)]


def test_latest_runs_newest_first_with_their_versions(lake):
    rows = overview.latest_runs(lake, 10)
    assert [(r["run_id"], r["episodes"], r["successes"], r["policy_versions"]) for r in rows] == [
        ("run-b", 2, 1, ["10"]), ("run-a", 2, 1, ["10", "9"])]
    assert rows[0]["last_episode_at"] > rows[1]["last_episode_at"]
    assert [r["run_id"] for r in overview.latest_runs(lake, 1)] == ["run-b"]
