"""Branches (`elake branch`): the sim replay reaches the parent's state for every task
template, a divergence is refused naming the step with nothing recorded, bad input names the
episode and step, and branch rows carry branch_of/branch_step and export like any episode."""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import UTC, datetime

import lance
import pyarrow as pa
import pytest

from episodelake.collectors.agents.oracle import OraclePolicy
from episodelake.collectors.envs.base import ActionResult, Task
from episodelake.collectors.envs.sim.device import SimDevice
from episodelake.collectors.envs.sim.tasks import all_tasks
from episodelake.collectors.jobs.branch import (
    BranchSpec,
    branch_point,
    failing_branches,
    run_branches,
)
from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts
from episodelake.collectors.loop import run_episode
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation import curation
from episodelake.lake.export.job import run_export
from episodelake.lake.export.spec import ExportSpec
from episodelake.lake.storage import layout, schema, tables
from episodelake.lake.storage.errors import BranchDiverged, InvalidInput
from episodelake.lake.vocab.families import ParsedAction
from tests.factories import response, screenshot

#: One task of every template of the simulated phone's registry.
ONE_PER_TEMPLATE = tuple({t.name: t.id for t in all_tasks()}.values())


def parents(lake: Lake, task_ids: tuple[str, ...], *, group_size: int = 1, seed: int = 1,
            run_id: str = "parents") -> list:
    """Episodes of the demo policy (the oracle with mistakes), judged step by step."""
    spec = RolloutSpec(task_ids, group_size=group_size, max_steps=12, run_id=run_id, seed=seed)
    report = run_rollouts(lake, spec, demo_agent("demo"), progress=False, backend="thread")
    lake.invalidate()
    return report.episodes


def steps_of(lake: Lake, episode_id: str) -> list[dict]:
    return lake.steps(episode_id, columns=["step", "ui_tree_hash", "anchor_key", "model_response",
                                           "step_reward", "info"]).to_pylist()


def test_the_replay_reaches_the_parents_state_for_every_task_template(lake):
    recorded = parents(lake, ONE_PER_TEMPLATE)
    assert len(recorded) == len(ONE_PER_TEMPLATE) == 33
    ids = tuple(e.episode_id for e in recorded)
    # the deepest branch each parent allows: every recorded action but the last is replayed
    report = run_branches(lake, BranchSpec(episode_ids=ids, at="0", n=1, policy="oracle"))
    assert report["refused"] == [] and report["recorded"] == 33
    deepest = 0
    for parent in recorded:
        point = branch_point(lake, parent.episode_id, parent.steps - 1)
        deepest = max(deepest, point.step)
        out = run_branches(lake, BranchSpec(episode_ids=(parent.episode_id,), at=str(point.step), n=1,
                                            policy="oracle"))
        assert out["refused"] == [], (parent.task_name, out["refused"])
        lake.invalidate()
        child = out["branches"][0]["episode_id"]
        row = lake.episode(child)
        assert (row["branch_of"], row["branch_step"]) == (parent.episode_id, point.step)
        assert row["group_id"] == lake.episode(parent.episode_id)["group_id"]
        mine, theirs = steps_of(lake, child), steps_of(lake, parent.episode_id)
        # the screens 0..K are the parent's, so step K is in the parent's anchor group
        for k in range(point.step + 1):
            assert mine[k]["ui_tree_hash"] == theirs[k]["ui_tree_hash"], (parent.task_name, k)
            assert mine[k]["anchor_key"] == theirs[k]["anchor_key"], (parent.task_name, k)
        for k in range(point.step):
            assert json.loads(mine[k]["info"])["replayed"] == {"from": parent.episode_id, "step": k}
            assert mine[k]["model_response"] == theirs[k]["model_response"]
            assert mine[k]["step_reward"] == theirs[k]["step_reward"]
        assert "replayed" not in json.loads(mine[point.step]["info"] or "{}")
        assert len(mine) > point.step  # the branch acted from K
    assert deepest >= 5


class DroppingDevice(SimDevice):
    """A phone that silently drops its `drop`-th action, as a real device loses a tap."""

    def __init__(self, drop: int):
        super().__init__(0)
        self.drop, self.calls = drop, 0

    def execute(self, action: ParsedAction) -> ActionResult:
        self.calls += 1
        if self.calls == self.drop + 1:
            return ActionResult("dropped")
        return super().execute(action)


def test_a_device_whose_screen_diverges_is_refused_naming_the_step_and_nothing_is_recorded(lake):
    parent = next(e for e in parents(lake, ("notes_create[title=Groceries,body=milk]",)) if e.steps >= 4)
    point = branch_point(lake, parent.episode_id, parent.steps - 1)
    before = {t: lake.dataset(t).count_rows() for t in ("episodes", "steps")}
    screens = [s.ui_tree_hash for s in point.steps]
    changed = next(k for k in range(point.step) if screens[k + 1] != screens[k])  # an action that moved
    device = DroppingDevice(drop=changed)
    task = point.tasks(1, seed=0, threshold=0)[0]
    with Recorder(lake) as rec, pytest.raises(BranchDiverged) as refused:
        run_episode(device, OraclePolicy(device), rec, task, max_steps=20)
    message = str(refused.value)
    assert f"episode {parent.episode_id}: the replay diverged at step {changed + 1}" in message
    assert "nothing of this branch was recorded" in message
    lake.invalidate()
    assert {t: lake.dataset(t).count_rows() for t in ("episodes", "steps")} == before
    # a recorded screen that is not what the phone shows at step 0: refused at step 0
    wrong = dataclasses.replace(task.branch, steps=(dataclasses.replace(task.branch.steps[0], ui_tree_hash="0" * 16),
                                                    *task.branch.steps[1:]))
    sim = SimDevice(0)
    with Recorder(lake) as rec, pytest.raises(BranchDiverged, match="diverged at step 0"):
        run_episode(sim, OraclePolicy(sim), rec, dataclasses.replace(task, branch=wrong), max_steps=20)


def test_a_divergent_branch_of_a_job_is_refused_and_the_others_recorded(lake, monkeypatch):
    recorded = parents(lake, ("wifi_on", "notes_create[title=Groceries,body=milk]"))
    long = next(e for e in recorded if e.steps >= 3)
    # the parent's step 1 recorded on another screen: its replay cannot reach it
    lake.upsert("steps", [{**lake.steps(long.episode_id).to_pylist()[1], "ui_tree_hash": "f" * 16}])
    lake.invalidate()
    ids = tuple(e.episode_id for e in recorded)
    report = run_branches(lake, BranchSpec(episode_ids=ids, at="2", n=2, policy="random"))
    refused = [r for r in report["refused"] if r["parent"] == long.episode_id]
    assert len(refused) == 2 and all("diverged at step 1" in r["error"] for r in refused)
    lake.invalidate()
    assert lake.sql("SELECT count(*) AS n FROM episodes WHERE branch_of = ?", [long.episode_id]).to_pylist()[0]["n"] == 0


def bare_episode(lake: Lake, episode_id: str, *, env: str = "sim", responses=("", "")) -> None:
    with lake.writer() as w:
        w.append("episodes", {"episode_id": episode_id, "task_name": "wifi_on", "env": env, "status": "finished",
                              "extra": json.dumps({"seed": 0})})
        for step, text in enumerate(responses):
            w.append("steps", {"episode_id": episode_id, "step": step, "image": screenshot(step),
                               "model_response": text, "ui_tree_hash": f"{step:016x}"})
    lake.invalidate()


def test_bad_input_names_the_episode_and_the_step(lake):
    bare_episode(lake, "no-actions")
    bare_episode(lake, "imported", env="clawgui-import",
                 responses=(response("click", coordinate=[1, 2]), response("click", coordinate=[1, 2])))
    bare_episode(lake, "judged", responses=(response("click", coordinate=[1, 2]),) * 3)
    cases = [("no-actions", 5, "episode no-actions: step 5 is beyond the episode's recorded steps (0..1)"),
             ("no-actions", 1, "episode no-actions: step 0 has no recorded action to replay"),
             ("imported", 1, "episode imported: env 'clawgui-import' cannot be reset to the episode's task"),
             ("judged", None, "episode judged: no failing step to branch at"),
             ("judged", 2, None)]
    for episode_id, at, message in cases:
        if message is None:
            assert branch_point(lake, episode_id, at).step == at
            continue
        with pytest.raises(InvalidInput) as refused:
            branch_point(lake, episode_id, at)
        assert message in str(refused.value)
    with pytest.raises(InvalidInput, match="step 2 needs --max-steps above 2"):
        branch_point(lake, "judged", 2, max_steps=2)
    with pytest.raises(InvalidInput, match="nothing was branched: episode no-actions: step 9 is beyond"):
        run_branches(lake, BranchSpec(episode_ids=("no-actions",), at="9", n=1, policy="random"))
    for fields, message in [({"at": "soon"}, "at: 'failing' or a step number"), ({"at": "-1"}, "0 or more"),
                            ({"n": 0}, "n must be an integer"), ({"policy": "greedy"}, "policy must be one of"),
                            ({"episode_ids": ()}, "choose the episodes")]:
        with pytest.raises(InvalidInput, match=message):
            BranchSpec(**{"episode_ids": ("judged",), **fields})


def test_failing_is_the_curators_failing_step_else_the_judges_first_low_step(lake):
    recorded = parents(lake, ("notes_create[title=Groceries,body=milk]", "contacts_add[name=Nora Blake,phone=555-0141]"),
                       group_size=3, seed=4)
    failed = [e for e in recorded if not e.success and e.steps >= 3]
    assert failed, "the demo policy fails some of these"
    parent = failed[0]
    rewards = [s["step_reward"] for s in steps_of(lake, parent.episode_id)]
    first_low = next(k for k, r in enumerate(rewards) if r is not None and r < 0.5)
    assert branch_point(lake, parent.episode_id, None).step == first_low
    s = curation.create_set(lake, "failures", kind="failure")
    curation.add_member(lake, s["set_id"], parent.episode_id, failure_category="planning", failing_step=1)
    lake.invalidate()
    assert branch_point(lake, parent.episode_id, None).step == 1
    report = run_branches(lake, BranchSpec(set="failures", at="failing", n=2, policy="oracle"))
    assert report["recorded"] == 2 and {b["step"] for b in report["branches"]} == {1}


def test_branch_rows_export_like_any_episode(lake, tmp_path):
    recorded = parents(lake, ("wifi_on", "dark_mode[state=on]"))
    report = run_branches(lake, BranchSpec(episode_ids=tuple(e.episode_id for e in recorded), at="1", n=1,
                                           policy="oracle"))
    children = [b["episode_id"] for b in report["branches"]]
    lake.invalidate()
    quoted = ", ".join(f"'{c}'" for c in children)
    result = run_export(lake, ExportSpec(format="swift", out=tmp_path / "out", where=f"episode_id IN ({quoted})",
                                         include_failed=True, val_fraction=0))
    lines = [json.loads(line) for path in (tmp_path / "out").rglob("*.jsonl") for line in path.read_text().splitlines()]
    steps = sum(lake.episode(c)["episode_length"] for c in children)
    assert result.manifest["counts"]["episodes"] == len(children) and len(lines) == steps
    # and SQL reads them with the parent
    rows = lake.sql(f"SELECT e.branch_of, count(*) AS n FROM episodes e JOIN steps s USING (episode_id) "
                    f"WHERE e.episode_id IN ({quoted}) AND json_extract(s.info, '$.replayed') IS NOT NULL "
                    "GROUP BY 1").to_pylist()
    assert sorted(r["branch_of"] for r in rows) == sorted(e.episode_id for e in recorded)


def test_failing_branches_deal_a_groups_budget_over_its_failed_episodes(lake):
    recorded = parents(lake, ("notes_create[title=Groceries,body=milk]", "wifi_on"), group_size=4, seed=4)
    plan = failing_branches(lake, recorded, per_group=3, seed=0)
    groups = {e.group_id for e in recorded}
    failing_groups = {e.group_id for e in recorded if e.success is False}
    assert set(plan.groups_without_failure) == groups - failing_groups
    assert len(plan.tasks) == 3 * len(failing_groups)
    assert all(t.branch is not None and t.group_id in failing_groups for t in plan.tasks)
    assert len({t.branch.agent_seed for t in plan.tasks}) == len(plan.tasks)


def test_the_cli_branches_and_refuses_with_the_step(lake, capsys):
    from episodelake.api import cli

    parent = parents(lake, ("wifi_on",))[0]
    assert cli.main(["--lake", str(lake.path), "branch", parent.episode_id, "--at", "0", "--n", "2",
                     "--policy", "oracle", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["recorded"] == 2 and report["refused"] == []
    assert cli.main(["--lake", str(lake.path), "branch", parent.episode_id, "--at", "40",
                     "--policy", "oracle"]) == 1
    assert f"episode {parent.episode_id}: step 40 is beyond" in capsys.readouterr().err
    assert cli.main(["--lake", str(lake.path), "branch", parent.episode_id]) == 1
    assert "choose the policy" in capsys.readouterr().err


def test_an_episodes_table_made_before_branches_gains_the_columns(tmp_path):
    lake = Lake(tmp_path / "old")
    old = pa.schema([f for f in schema.EPISODES if f.name not in ("branch_of", "branch_step")])
    shutil.rmtree(layout.table_path(lake.path, "episodes"))
    lance.write_dataset(pa.Table.from_pylist([{"episode_id": "e-old", "task_name": "wifi_on"}], schema=old),
                        str(layout.table_path(lake.path, "episodes")), enable_stable_row_ids=True)
    again = Lake(lake.path)
    assert tables.open_table(lake.path, "episodes").schema == schema.EPISODES
    assert again.episode("e-old")["branch_of"] is None
    # a parent made before: judged nothing, but it can be branched at a step
    assert Task("wifi_on").branch is None


def test_dpo_pairs_branches_at_their_step_and_never_their_replayed_rows(lake, tmp_path):
    """p and its sibling s fail (another first action on the same screen); b branches p at
    step 1 and succeeds. The one pair is b1 over p1: b's replayed step 0 is p's action, whose
    outcome was p's, so it must not be chosen over s0 for b's success."""
    from episodelake.collectors.record.recorder import build_step_row

    click = response("click", coordinate=[100, 200])
    other = response("click", coordinate=[700, 900])
    episodes = {"p": (False, None, [("home", click), ("list", click)]),
                "s": (False, None, [("home", other)]),
                "b": (True, 1, [("home", click), ("list", other)])}
    with lake.writer() as w:
        for minute, (episode_id, (success, branch_step, steps)) in enumerate(episodes.items()):
            w.append("episodes", {"episode_id": episode_id, "task_name": "t", "task_goal": "do t", "group_id": "g",
                                  "created_at": datetime(2026, 1, 1, 0, minute, tzinfo=UTC),
                                  "status": "finished", "success": success, "branch_step": branch_step,
                                  "branch_of": "p" if branch_step is not None else None})
            for k, (anchor, text) in enumerate(steps):
                # a replayed screenshot is not byte-equal to the parent's (the status-bar clock)
                image = screenshot(k + (10 if episode_id == "b" else 0))
                row = build_step_row(episode_id, k, image, text, step_reward=1.0)
                w.append("steps", {**row, "anchor_key": anchor})
    lake.invalidate()
    run_export(lake, ExportSpec(format="dpo", out=tmp_path / "dpo", include_failed=True, val_fraction=0))
    pairs = [json.loads(line) for path in (tmp_path / "dpo").glob("*.jsonl") for line in path.read_text().splitlines()]
    found = sorted((p["chosen_from"]["episode_id"], p["chosen_from"]["step"], p["rejected_from"]["episode_id"],
                    p["rejected_from"]["step"]) for p in pairs)
    assert found == [("b", 1, "p", 1)]
