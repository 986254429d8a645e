"""Lineage: exports, datasets and `elake train` record what they read; `elake lineage` prints
it; "which episodes trained this checkpoint" is one SQL query; failures leave no row."""

from __future__ import annotations

import json

import pytest

from episodelake.api.cli import main
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.ops import lineage, purge
from episodelake.lake.storage.errors import InvalidInput, NotFound
from tests.lake.export.test_export import build_lake, export, record


@pytest.fixture()
def lake(tmp_path) -> Lake:
    return build_lake(tmp_path / "lake", episodes_per_task=1, steps=2)


def test_an_export_records_its_lineage(lake, tmp_path):
    result = export(lake, tmp_path / "out", "swift", where="task_name IN ('task-1', 'task-2')", val_fraction=0)
    (row,) = lineage.lineage_of(lake, result.export_id)
    assert row["kind"] == "export" and row["output"] == result.export_id
    assert row["episode_ids"] == ["ep-001", "ep-002", "ep-judged"]
    assert row["counts"]["samples"] == result.samples and row["counts"]["episodes"] == 3
    assert row["lake_versions"] == result.manifest["source"]["lake_versions"]
    assert row["selection"]["where"] == "task_name IN ('task-1', 'task-2')"
    # the documented query: the episodes behind an output
    episodes = lake.sql(lineage.EPISODES_OF, [row["lineage_id"]]).to_pylist()
    assert [e["episode_id"] for e in episodes] == row["episode_ids"]


def test_a_failed_export_leaves_no_lineage(lake, tmp_path):
    with pytest.raises(InvalidInput, match="dpo"):
        export(lake, tmp_path / "out", "dpo", val_fraction=0)  # no anchor keys: no pair
    assert lake.sql("SELECT status FROM exports").to_pylist() == [{"status": "failed"}]
    assert lake.sql("SELECT count(*) AS n FROM lineage").to_pylist() == [{"n": 0}]


def test_training_lineage_is_the_runs_rollouts_up_to_the_checkpoint(tmp_path):
    lake = Lake(tmp_path / "lake")
    with Recorder(lake, anchor=None) as rec:
        for it in range(3):
            for k in range(2):
                with rec.start_episode("task-x", "Goal", episode_id=f"r-{it}-{k}", run_id="r1",
                                       policy_version=str(it)) as ep:
                    ep.log_step(None, "", image_missing="test")
                    ep.finish(success=True)
            with rec.start_episode("task-x", "Goal", episode_id=f"eval-{it}", run_id="r1.eval",
                                   policy_version=str(it + 1)) as ep:
                ep.finish(success=False)
    lake.invalidate()
    lineage.record_training(lake, "r1", 1, "/runs/r1/iter-000001")
    (row,) = lineage.lineage_of(lake, "iter-000001")  # found by the checkpoint's name
    assert row["kind"] == "train" and row["run_id"] == "r1"
    assert row["episode_ids"] == ["r-0-0", "r-0-1", "r-1-0", "r-1-1"]
    assert row["counts"] == {"episodes": 4, "steps": 4}
    trained = lake.sql(lineage.CHECKPOINT_EPISODES, ["r1", 1]).to_pylist()
    assert [e["episode_id"] for e in trained] == row["episode_ids"]
    assert row["in_lake"] == 4 and row["purged"] == {} and row["missing"] == []


def test_bad_lineage_input_is_named(lake):
    with pytest.raises(InvalidInput, match="kind"):
        lineage.record(lake, "guess", "x", episode_ids=[], lake_versions={}, selection={}, counts={})
    with pytest.raises(InvalidInput, match="output"):
        lineage.record(lake, "export", " ", episode_ids=[], lake_versions={}, selection={}, counts={})
    with pytest.raises(NotFound, match="no lineage for 'ckpt-9'"):
        lineage.lineage_of(lake, "ckpt-9")


def test_elake_lineage_prints_an_export_by_id_or_folder(lake, tmp_path, capsys):
    result = export(lake, tmp_path / "out", "swift", where="task_name = 'task-3'", val_fraction=0)
    for target in (result.export_id, str(tmp_path / "out")):
        assert main(["--lake", str(lake.path), "lineage", target]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"export {result.export_id}") and "episodes read (1): 1 in the lake" in out and "ep-003" in out
        assert "unnest(episode_ids)" in out
    assert main(["--lake", str(lake.path), "lineage", result.export_id, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["episode_ids"] == ["ep-003"]
    assert main(["--lake", str(lake.path), "lineage", "iter-000040"]) == 1
    assert "elake lineage: no lineage for 'iter-000040'" in capsys.readouterr().err


def test_the_lineage_table_grows_with_the_lake(lake, tmp_path):
    """A dataset's and an export's rows side by side; a later recording changes neither."""
    from episodelake.trainer.data import sft_dataset

    sft_dataset(lake, where="task_name = 'task-4'", lineage="warmup")
    with Recorder(lake, anchor=None) as rec:
        record(rec, "task-4", 2, seed=90, episode_id="ep-later")
    lake.invalidate()
    (row,) = lineage.lineage_of(lake, "warmup")
    assert row["episode_ids"] == ["ep-004"]


@pytest.mark.slow
def test_elake_train_records_each_checkpoints_lineage(tmp_path, capsys):
    lake_dir = tmp_path / "lake"
    code = main(["--lake", str(lake_dir), "train", "--tasks", "1", "--group-size", "2", "--iterations", "2",
                 "--max-steps", "2", "--eval-repeats", "0", "--run-id", "lin", "--no-progress"])
    assert code == 0, capsys.readouterr()
    lake = Lake(lake_dir, create=False)
    first, second = (lineage.lineage_of(lake, f"iter-00000{i}")[0] for i in (0, 1))
    assert first["kind"] == second["kind"] == "train" and first["run_id"] == "lin"
    assert len(first["episode_ids"]) == 2 and len(second["episode_ids"]) == 4
    assert set(first["episode_ids"]) < set(second["episode_ids"])


def _two_runs(tmp_path) -> Lake:
    """Runs r1 and r2, each with a checkpoint iter-000001 (two iterations of one episode)."""
    lake = Lake(tmp_path / "lake")
    with Recorder(lake, anchor=None) as rec:
        for run in ("r1", "r2"):
            for it in range(2):
                with rec.start_episode("task-x", "Goal", episode_id=f"{run}-{it}", run_id=run,
                                       policy_version=str(it)) as ep:
                    ep.log_step(None, "", image_missing="test")
                    ep.finish(success=True)
    lake.invalidate()
    for run in ("r1", "r2"):
        lineage.record_training(lake, run, 1, f"/runs/{run}/checkpoints/iter-000001")
    return lake


def test_a_checkpoint_name_that_two_runs_have_is_refused_listing_both(tmp_path, capsys):
    lake = _two_runs(tmp_path)
    with pytest.raises(InvalidInput, match="'iter-000001' is ambiguous") as refused:
        lineage.lineage_of(lake, "iter-000001")
    assert "r1/iter-000001" in str(refused.value) and "r2/iter-000001" in str(refused.value)
    (row,) = lineage.lineage_of(lake, "r2/iter-000001")  # by run and checkpoint
    assert row["run_id"] == "r2" and row["episode_ids"] == ["r2-0", "r2-1"]
    assert lineage.lineage_of(lake, row["lineage_id"])[0]["output"] == row["output"]
    assert lineage.lineage_of(lake, "/runs/r2/checkpoints/iter-000001")[0]["lineage_id"] == row["lineage_id"]
    # the documented query by run and checkpoint: only that run's episodes (a LIKE on the
    # checkpoint's name would return both runs')
    trained = lake.sql(lineage.CHECKPOINT_EPISODES, ["r2", 1]).to_pylist()
    assert [e["episode_id"] for e in trained] == ["r2-0", "r2-1"]
    assert main(["--lake", str(lake.path), "lineage", "iter-000001"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ambiguous" in err and "r1/iter-000001" in err and "r2/iter-000001" in err
    assert main(["--lake", str(lake.path), "lineage", "r1/iter-000001"]) == 0
    assert "episodes read (2): 2 in the lake" in capsys.readouterr().out


def test_a_purged_episode_is_marked_and_the_counts_are_the_sqls(lake, tmp_path, capsys):
    result = export(lake, tmp_path / "out", "swift", where="task_name IN ('task-1', 'task-2')", val_fraction=0)
    report = purge.purge(lake, ["ep-002"])
    lake.invalidate()
    (row,) = lineage.lineage_of(lake, result.export_id)
    assert row["episode_ids"] == ["ep-001", "ep-002", "ep-judged"]  # what was read stays recorded
    job = lake.sql("SELECT finished_at FROM jobs WHERE job_id = ?", [report["job_id"]]).to_pylist()[0]
    assert row["purged"] == {"ep-002": {"purged_at": job["finished_at"], "job_id": report["job_id"]}}
    in_lake = lake.sql(lineage.EPISODES_OF, [row["lineage_id"]]).to_pylist()
    assert row["in_lake"] == len(in_lake) == 2 and row["missing"] == []
    assert main(["--lake", str(lake.path), "lineage", result.export_id]) == 0
    out = capsys.readouterr().out
    assert "episodes read (3): 2 in the lake, 1 purged" in out
    assert f"ep-002 [purged {job['finished_at']:%Y-%m-%d %H:%M:%S} UTC, {report['job_id']}]" in out
    assert "in the lake (2): elake sql" in out
    assert main(["--lake", str(lake.path), "lineage", result.export_id, "--json"]) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    assert printed["in_lake"] == 2 and set(printed["purged"]) == {"ep-002"}
