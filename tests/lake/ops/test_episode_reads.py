"""Reads of stored episodes and steps the API's pages ask for (`lake.ops.episode_reads`), on a
real lake recorded through the Recorder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.ops import episode_reads
from episodelake.lake.storage.errors import InvalidInput, NotFound
from tests.factories import response, screenshot

T0 = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    """p-0 (3 steps, run-a) with two branches from its steps 2 and 1 recorded by job-1, which
    also recorded a plain episode; q-0 (2 steps, run-b)."""
    lake = Lake(tmp_path_factory.mktemp("reads") / "lake")
    with Recorder(lake, anchor=None, run_id="run-a", policy_version="3") as rec:
        for n, (episode_id, task, steps, fields) in enumerate([
                ("p-0", "t1", 3, {}), ("q-0", "t2", 2, {"run_id": "run-b", "policy_version": None}),
                ("b-2", "t1", 1, {"run_id": "job-1"}), ("b-1", "t1", 1, {"run_id": "job-1"}),
                ("plain", "t1", 1, {"run_id": "job-1"})]):
            with rec.start_episode(task, f"goal of {task}", episode_id=episode_id,
                                   created_at=T0 + timedelta(minutes=n), **fields) as ep:
                for k in range(steps):
                    ep.log_step(screenshot(10 * n + k), response("click", thinking=f"{episode_id} {k}"))
                ep.finish(success=True)
    lake.invalidate()
    for episode_id, step in (("b-2", 2), ("b-1", 1)):
        lake.upsert("episodes", [{**lake.episode(episode_id), "branch_of": "p-0", "branch_step": step}])
    lake.invalidate()
    return lake


def test_step_row_is_the_stored_row_without_image_bytes(lake):
    row = episode_reads.step_row(lake, "p-0", 1)
    assert (row["episode_id"], row["step"]) == ("p-0", 1) and row["image_format"] == "png"
    assert "p-0 1" in row["model_response"] and "image" not in row


def test_step_row_names_what_is_missing(lake):
    with pytest.raises(NotFound, match="'p-0' has no step 9"):
        episode_reads.step_row(lake, "p-0", 9)
    with pytest.raises(NotFound, match="'nope' is not in the lake"):
        episode_reads.step_row(lake, "nope", 0)
    with pytest.raises(InvalidInput):
        episode_reads.step_row(lake, "a..b", 0)


def test_episode_context_names_task_run_and_policy_version_of_each_known_episode(lake):
    context = episode_reads.episode_context(lake, ["q-0", "p-0", "p-0", "nope"])
    assert context == {"p-0": {"task_name": "t1", "run_id": "run-a", "policy_version": "3"},
                       "q-0": {"task_name": "t2", "run_id": "run-b", "policy_version": None}}
    assert episode_reads.episode_context(lake, []) == {}


def test_branches_of_a_parent_and_of_a_job_by_branch_step(lake):
    by_parent = episode_reads.branches_of(lake, "branch_of", "p-0")
    assert [(r["episode_id"], r["branch_step"]) for r in by_parent] == [("b-1", 1), ("b-2", 2)]
    # the job's plain episode is no branch
    assert [r["episode_id"] for r in episode_reads.branches_of(lake, "run_id", "job-1")] == ["b-1", "b-2"]
    assert episode_reads.branches_of(lake, "branch_of", "q-0") == []


def test_episode_ids_where_runs_the_callers_condition_with_its_parameters(lake):
    assert episode_reads.episode_ids_where(lake, "e.task_name = ?", ["t1"]) == ["b-1", "b-2", "p-0", "plain"]
    assert episode_reads.episode_ids_where(lake, "TRUE", []) == ["b-1", "b-2", "p-0", "plain", "q-0"]
    assert episode_reads.episode_ids_where(lake, "e.run_id = ?", ["x'; --"]) == []
