"""Edits: retask, delete, split, merge, delete steps, undo; keys stay consistent and bad input
is one clear line."""

from __future__ import annotations

import pytest

from episodelake.api import cli
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.ops import edits, jobs
from episodelake.lake.storage.errors import Conflict, InvalidInput, NotFound
from tests import factories


def record(lake: Lake, n_steps: int = 6, *, run_id: str = "r1", task: str = "sms", group: str | None = "g1",
           seed: int = 0) -> str:
    with Recorder(lake, anchor=None, run_id=run_id) as rec:
        with rec.start_episode(task, f"send a text ({seed})", group_id=group) as ep:
            for s in range(n_steps):
                ep.log_step(factories.screenshot(seed * 100 + s), factories.response("click", thinking=f"s{s}"),
                            reward=float(s))
            ep.finish(success=True, eval_score=0.9, eval_reason="reached the end")
    return ep.episode_id


def state(lake: Lake, episode_id: str) -> dict:
    """Everything stored about an episode, screenshot bytes included."""
    episodes, steps = lake.episode_batch([episode_id], images=True)
    return {"episode": episodes.to_pylist(), "steps": steps.sort_by("step").to_pylist(),
            "annotations": sorted((r["annotation_id"], r["episode_id"], r["step"], r["deleted"]) for r in
                                  lake.sql("select * from annotations").to_pylist()),
            "members": sorted((r["set_id"], r["episode_id"], r["failing_step"]) for r in
                              lake.sql("select * from set_members").to_pylist())}


def annotate(lake: Lake, episode_id: str) -> None:
    lake.upsert("annotations", [{"annotation_id": f"a{s}", "episode_id": episode_id, "step": s, "note": f"n{s}",
                                 "deleted": False} for s in (1, 4)])
    lake.upsert("set_members", [{"set_id": "early", "episode_id": episode_id, "failing_step": 1},
                                {"set_id": "late", "episode_id": episode_id, "failing_step": 4}])


def test_split_then_merge_returns_the_original_episode(lake):
    episode = record(lake)
    annotate(lake, episode)
    before = state(lake, episode)
    report = edits.split(lake, episode, 3)
    first, second = report["episode_ids"]
    assert second == f"{episode}.3"
    assert lake.steps(first)["step"].to_pylist() == [0, 1, 2]
    assert lake.steps(second)["step"].to_pylist() == [0, 1, 2]  # renumbered from 0
    assert [lake.image(second, s)[0] for s in range(3)] == [factories.screenshot(s) for s in (3, 4, 5)]
    assert lake.episode(first)["success"] is None and lake.episode(second)["success"] is True
    assert lake.episode(first)["episode_length"] == 3 == lake.episode(second)["episode_length"]
    assert ("a4", second, 1, False) in state(lake, first)["annotations"]  # annotations follow their step
    assert ("late", second, 1) in state(lake, first)["members"]
    edits.merge(lake, first, second)
    assert state(lake, episode) == before
    assert lake.sql(f"select count(*) n from episodes where episode_id = '{second}'").to_pylist() == [{"n": 0}]
    kinds = [j["params"]["op"] for j in jobs.list_jobs(lake, kind="edit")]
    assert sorted(kinds) == ["merge", "split"]


def test_retask_moves_the_episode_in_sql_and_out_of_its_group(lake):
    episode, other = record(lake), record(lake, seed=1)
    edits.retask(lake, episode, task="wifi_on", goal="Turn on Wi-Fi")
    by_task = lake.sql("select task_name, count(*) n from episodes group by 1 order by 1").to_pylist()
    assert by_task == [{"task_name": "sms", "n": 1}, {"task_name": "wifi_on", "n": 1}]
    row = lake.episode(episode)
    assert row["task_goal"] == "Turn on Wi-Fi" and row["group_id"] is None
    assert lake.episode(other)["group_id"] == "g1"
    edits.retask(lake, episode, goal="Switch Wi-Fi on", group="g9")
    assert lake.episode(episode)["group_id"] == "g9"
    [record_] = [j for j in jobs.list_jobs(lake, kind="edit") if j["params"]["op"] == "retask"][-1:]
    assert "Wi-Fi" not in str(record_["params"])  # the goal's text is not recorded


def test_delete_and_undo(lake):
    keep, gone = record(lake), record(lake, seed=1)
    annotate(lake, gone)
    before = state(lake, gone)
    report = edits.delete(lake, where="task_goal = 'send a text (1)'")
    assert report["episode_ids"] == [gone] and report["rows_removed"]["steps"] == 6
    assert lake.sql("select episode_id from episodes")["episode_id"].to_pylist() == [keep]
    edits.undo(lake, report["job_id"])
    assert state(lake, gone) == before


def test_undo_a_split(lake):
    episode = record(lake)
    before = state(lake, episode)
    report = edits.split(lake, episode, 2)
    edits.undo(lake, report["job_id"])
    assert state(lake, episode) == before
    assert lake.sql("select count(*) n from episodes").to_pylist() == [{"n": 1}]


def test_delete_steps_renumbers_and_annotations_follow(lake):
    episode = record(lake)
    annotate(lake, episode)
    edits.delete_steps(lake, episode, [1, 2])
    steps = lake.steps(episode)
    assert steps["step"].to_pylist() == [0, 1, 2, 3]
    assert steps["reward"].to_pylist() == [0.0, 3.0, 4.0, 5.0]
    assert [lake.image(episode, s)[0] for s in range(4)] == [factories.screenshot(s) for s in (0, 3, 4, 5)]
    assert lake.episode(episode)["episode_length"] == 4
    notes = {r["annotation_id"]: (r["step"], r["deleted"]) for r in lake.sql("select * from annotations").to_pylist()}
    assert notes == {"a1": (1, True), "a4": (2, False)}
    members = {r["set_id"]: r["failing_step"] for r in lake.sql("select * from set_members").to_pylist()}
    assert members == {"early": None, "late": 2}


def test_bad_input_is_refused_before_anything_changes(lake):
    episode, other_run = record(lake), record(lake, run_id="r2", seed=1)
    versions = lake.current_versions()
    with pytest.raises(NotFound, match="not in the lake"):
        edits.retask(lake, "nope", task="x")
    with pytest.raises(NotFound, match="unknown episode id"):
        edits.delete(lake, ["nope", episode])
    for at in (0, 6, 99, -1):
        with pytest.raises(InvalidInput, match="outside episode"):
            edits.split(lake, episode, at)
    with pytest.raises(Conflict, match="different runs.*--force"):
        edits.merge(lake, episode, other_run)
    with pytest.raises(NotFound, match="has no step"):
        edits.delete_steps(lake, episode, [7])
    with pytest.raises(InvalidInput, match="every step"):
        edits.delete_steps(lake, episode, range(6))
    assert lake.current_versions() == versions
    edits.merge(lake, episode, other_run, force=True)
    assert lake.episode(episode)["episode_length"] == 12


@pytest.mark.parametrize("argv,message", [
    (["episode", "retask", "nope", "--task", "x"], "not in the lake"),
    (["episode", "delete", "nope"], "unknown episode id"),
    (["episode", "split", "{e}", "--at", "9"], "outside episode"),
    (["episode", "merge", "{e}", "{o}"], "different runs"),
    (["steps", "delete", "{e}", "--steps", "3,x"], "separated by commas"),
    (["purge", "--where", "task_name = 'none'", "--yes"], "matches no episode"),
])
def test_bad_input_on_the_command_line_is_one_line(lake, capsys, argv, message):
    episode, other_run = record(lake), record(lake, run_id="r2", seed=1)
    capsys.readouterr()
    argv = [a.format(e=episode, o=other_run) for a in argv]
    assert cli.main(["--lake", str(lake.path), *argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_the_command_line_edits(lake, capsys):
    episode = record(lake)
    base = ["--lake", str(lake.path)]
    assert cli.main([*base, "episode", "split", episode, "--at", "4"]) in (0, None)
    assert cli.main([*base, "episode", "merge", episode, f"{episode}.4"]) in (0, None)
    assert cli.main([*base, "steps", "delete", episode, "--steps", "0"]) in (0, None)
    assert cli.main([*base, "episode", "retask", episode, "--goal", "other"]) in (0, None)
    out = capsys.readouterr().out
    assert "split" in out and "merged" in out and "numbered 0..4" in out and "elake episode undo" in out
    assert Lake(lake.path).episode(episode)["task_goal"] == "other"


def test_an_edit_is_undoable_until_a_purge(lake):
    from episodelake.lake.ops import purge

    episode, other = record(lake), record(lake, seed=1)
    report = edits.retask(lake, episode, goal="fixed goal")
    purge.purge(lake, [other])  # prunes every old version of the episode tables
    with pytest.raises(NotFound, match="is gone"):
        edits.undo(lake, report["job_id"])
    assert lake.episode(episode)["task_goal"] == "fixed goal"


def test_an_edit_stopped_midway_can_be_undone(lake, monkeypatch):
    episode = record(lake)
    before = state(lake, episode)

    def fail(*_args, **_kwargs):
        raise OSError("the disk went away")

    monkeypatch.setattr(edits, "_move_annotations", fail)  # after the episodes and steps commits
    with pytest.raises(OSError):
        edits.split(lake, episode, 3)
    monkeypatch.undo()
    [stopped] = jobs.list_jobs(lake, kind="edit")
    assert stopped["status"] == "failed" and lake.steps(episode).num_rows == 3  # half done
    edits.undo(lake, stopped["job_id"])
    assert state(lake, episode) == before
    assert lake.sql("select count(*) n from episodes").to_pylist() == [{"n": 1}]
