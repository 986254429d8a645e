"""Regression re-runs on the simulated phone: a perfect policy fixes a failure set, the same
noisy policy shows no significant change, and the report is stored and readable."""

from __future__ import annotations

import json

import pytest

from episodelake.collectors.agents.oracle import NoiseConfig, OraclePolicy
from episodelake.collectors.agents.random import RandomPolicy
from episodelake.collectors.envs.base import Task
from episodelake.collectors.envs.sim.device import SimDevice
from episodelake.collectors.envs.sim.tasks import sample_tasks
from episodelake.collectors.jobs.rerun import (
    RerunSpec,
    get_rerun,
    list_reruns,
    newcombe,
    render,
    run_rerun,
    wilson,
)
from episodelake.collectors.loop import run_episode
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation import curation
from episodelake.lake.export import SetEpisodesMissing
from episodelake.lake.storage.errors import InvalidInput

TASK_IDS = [t.id for t in sample_tasks(4, seed=7)]


def record_set(lake: Lake, name: str, policy_for, *, episodes_per_task: int, kind: str = "failure",
               only_failures: bool = False, seed: int = 0, max_steps: int = 12) -> dict:
    """Run the tasks with a policy and put the episodes in a new set (all, or the failures)."""
    device = SimDevice(seed)
    policy = policy_for(device)
    with Recorder(lake) as rec:
        summaries = [run_episode(device, policy, rec, Task(task), max_steps=max_steps)
                     for task in TASK_IDS for _ in range(episodes_per_task)]
    lake.invalidate()
    s = curation.create_set(lake, name, kind=kind)
    for summary in summaries:
        if not only_failures or not summary.success:
            curation.add_member(lake, s["set_id"], summary.episode_id, failure_category="planning")
    return s


def test_a_perfect_policy_fixes_every_task_of_a_failure_set(lake):
    record_set(lake, "failures", lambda d: RandomPolicy(3, terminate_p=0.3), episodes_per_task=1,
               only_failures=True)
    progress = []
    report = run_rerun(lake, RerunSpec(set="failures", policy="oracle", n=2),
                       lambda done, total: progress.append((done, total)))
    tasks = report["tasks"]
    assert tasks and all(t["status"] == "fixed" for t in tasks)
    assert report["fixed"] == [t["task"] for t in tasks] and report["broke"] == []
    assert report["before"]["rate"] == 0.0 and report["after"]["rate"] == 1.0
    low, high = report["interval"]
    assert 0 < low <= report["delta"] == 1.0 <= high
    assert progress[-1] == (2 * len(tasks), 2 * len(tasks))
    # the new episodes are in the lake under the re-run's id
    rows = lake.sql("SELECT task_name, success, tags FROM episodes WHERE run_id = ?",
                    [report["rerun_id"]]).to_pylist()
    assert len(rows) == 2 * len(tasks) and all(r["success"] and r["tags"] == ["rerun"] for r in rows)
    assert sorted(i for t in tasks for i in t["episode_ids"]) == sorted(
        r["episode_id"] for r in lake.sql("SELECT episode_id FROM episodes WHERE run_id = ?",
                                          [report["rerun_id"]]).to_pylist())


def test_the_same_noisy_policy_shows_no_significant_change(lake):
    # a regression set holds every episode, not only failures: "before" is then an unbiased
    # estimate of the old policy, and re-running that same policy changes nothing real
    record_set(lake, "benchmark", lambda d: OraclePolicy(d, NoiseConfig.demo().scaled(0.7), seed=1), episodes_per_task=3,
               kind="regression", max_steps=8)
    report = run_rerun(lake, RerunSpec(set="benchmark", policy="noisy:0.7", n=3, seed=2, max_steps=8))
    low, high = report["interval"]
    assert 0 < report["before"]["rate"] < 1 and 0 < report["after"]["rate"] < 1
    assert low < 0 < high
    assert report["before"]["episodes"] == report["after"]["episodes"] == 12


def test_the_report_is_stored_listed_and_rendered(lake):
    record_set(lake, "failures", lambda d: RandomPolicy(3, terminate_p=0.3), episodes_per_task=1,
               only_failures=True)
    report = run_rerun(lake, RerunSpec(set="failures", policy="oracle", n=1))
    total = {"done": len(report["tasks"]), "total": len(report["tasks"])}
    assert get_rerun(lake, report["rerun_id"]) == {**report, "status": "finished", "progress": total, "error": None}
    (listed,) = list_reruns(lake)
    assert listed["rerun_id"] == report["rerun_id"] and listed["status"] == "finished"
    assert listed["fixed"] == len(report["fixed"]) and listed["set"]["name"] == "failures"
    text = render(report)
    assert "fixed" in text and "delta +100.0 points" in text and "newcombe-wilson" in text
    row = lake.sql("SELECT * FROM runs WHERE run_id = ?", [report["rerun_id"]]).to_pylist()[0]
    assert row["kind"] == "rerun" and json.loads(row["config"])["policy"] == "oracle"


def test_the_cli_reruns_and_prints_json(lake, capsys):
    from episodelake.api import cli

    record_set(lake, "failures", lambda d: RandomPolicy(3, terminate_p=0.3), episodes_per_task=1,
               only_failures=True)
    assert cli.main(["--lake", str(lake.path), "rerun", "--set", "failures", "--policy", "oracle",
                     "--n", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["after"]["rate"] == 1.0
    assert cli.main(["--lake", str(lake.path), "rerun", "--list"]) == 0
    assert report["rerun_id"] in capsys.readouterr().out
    assert cli.main(["--lake", str(lake.path), "rerun", "--set", "failures", "--policy", "oracle",
                     "--env", "adb"]) == 1
    assert "use it with env sim" in capsys.readouterr().err


def test_a_set_whose_episodes_were_deleted_cannot_be_rerun(lake):
    s = record_set(lake, "failures", lambda d: RandomPolicy(3, terminate_p=0.3), episodes_per_task=1)
    gone = curation.members(lake, s["set_id"])[0]["episode_id"]
    lake.dataset("episodes").delete(f"episode_id = '{gone}'")
    lake.invalidate()
    with pytest.raises(SetEpisodesMissing, match=gone):
        run_rerun(lake, RerunSpec(set="failures", policy="oracle", n=1))
    assert list_reruns(lake) == []


@pytest.mark.parametrize(("fields", "message"), [
    ({"policy": "genius"}, "policy must be one of"),
    ({"policy": "noisy:lots"}, "not noisy:P"),
    ({"policy": "model"}, "model_url"),
    ({"policy": "oracle", "env": "mobileworld"}, "env sim"),
    ({"policy": "random", "env": "mobileworld"}, "servers"),
    ({"policy": "oracle", "n": 0}, "n must be"),
    ({"policy": "oracle", "env": "moon"}, "env must be"),
])
def test_bad_specs_name_the_field(fields, message):
    with pytest.raises(InvalidInput, match=message):
        RerunSpec(set="s", **fields)


def test_intervals_match_known_values():
    # Newcombe (1998), table II, example (a): 56/70 vs 48/80 -> 0.0524 to 0.3339
    low, high = newcombe((56, 70), (48, 80), 0.95)
    assert round(low, 4) == 0.0524 and round(high, 4) == 0.3339
    assert wilson(0, 10, 1.959964)[0] == 0.0 and round(wilson(0, 10, 1.959964)[1], 4) == 0.2775
