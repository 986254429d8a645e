"""Rollouts on the simulated phone, recorded for real; every backend of the batch runner plays
the same episodes; the demo lake matches what ran."""

from __future__ import annotations

import re

from episodelake.collectors.envs.sim.device import SimJudge
from episodelake.collectors.jobs.batch import RunSettings, SimSpec, run_batch
from episodelake.collectors.jobs.rollout import (
    RolloutSpec,
    demo_agent,
    rollout_tasks,
    run_rollouts,
    task_ids,
)
from episodelake.lake import Lake
from tests.api.test_cli import elake


def test_rollouts_record_groups_rewards_and_anchor_keys(lake):
    spec = RolloutSpec(task_ids(["wifi_on", "bluetooth_off"]), group_size=3, max_steps=12,
                       run_id="r1", policy_version="p7", seed=3)
    report = run_rollouts(lake, spec, demo_agent("none"), workers=2, progress=False)
    assert len(report.episodes) == 6 and report.success_rate == 1.0  # the oracle
    rows = lake.sql("""
        select e.group_id, count(distinct e.episode_id) episodes, count(*) steps,
               count(s.anchor_key) keyed, count(s.step_reward) judged,
               count(distinct s.anchor_key) keys, bool_and(e.success) ok,
               any_value(e.run_id) run_id, any_value(e.policy_version) version, any_value(e.env) env
        from episodes e join steps s using (episode_id) group by 1 order by 1
    """).to_pylist()
    assert len(rows) == 2
    for row in rows:
        assert row["episodes"] == 3 and row["keyed"] == row["judged"] == row["steps"]
        assert row["ok"] and (row["run_id"], row["version"], row["env"]) == ("r1", "p7", "sim")
        # the oracle walks the same screens in every rollout: keys repeat across episodes
        assert row["keys"] < row["steps"]
    assert report.steps == lake.sql("select count(*) from steps").column(0)[0].as_py()


def test_noisy_rollouts_fail_sometimes_and_say_why(lake):
    spec = RolloutSpec(task_ids(6, seed=1), group_size=4, max_steps=10, run_id="r2", seed=1)
    report = run_rollouts(lake, spec, demo_agent("demo"), progress=False)
    assert 0 < report.success_rate < 1
    noise = lake.sql("select distinct json_extract_string(info, '$.noise') n from steps "
                     "where json_extract_string(info, '$.noise') is not null").column(0).to_pylist()
    assert noise, "noisy steps record the mistake behind them"
    zero = lake.sql("select count(*) from steps where step_reward = 0 and step_reward_reason is not null")
    assert zero.column(0)[0].as_py() > 0


def test_every_backend_plays_the_same_episodes_byte_for_byte(tmp_path):
    # one loop, seeds carried by the tasks: which worker, process or thread ran an episode
    # changes nothing that is stored about it
    spec = RolloutSpec(task_ids(4, seed=2), group_size=2, max_steps=6, run_id="b", seed=2)
    settings = RunSettings("b", max_steps=6, judge=SimJudge)
    stored = []
    for backend, workers in (("process", 2), ("thread", 2), ("process", 1)):
        lake = Lake(tmp_path / f"{backend}-{workers}")
        run_batch(lake, [(SimSpec(), demo_agent("demo"))] * workers, rollout_tasks(spec), settings,
                  backend=backend)
        stored.append(lake.sql("""
            select e.group_id, e.extra, e.success, e.episode_reward, s.step, s.image_sha256,
                   s.model_response, s.reward, s.step_reward, s.step_reward_reason, s.anchor_key
            from episodes e join steps s using (episode_id) order by e.extra, s.step
        """).to_pylist())
    assert len(stored[0]) > 16 and stored[0] == stored[1] == stored[2]
    assert {r["step_reward"] for r in stored[0]} == {0.0, 1.0}


def test_demo_lake_counts_match_the_runner(tmp_path):
    lake = tmp_path / "demo"
    out = elake("demo", "--tasks", "3", "--group-size", "2", "--workers", "1", "--enrich", "phash",
                lake=lake).stdout
    reported = [(int(n), int(s)) for n, s in re.findall(r"(\d+) episodes, (\d+) steps", out)]
    assert len(reported) == 2
    counts = elake("sql", "select count(*) from episodes", "--format", "csv", lake=lake).stdout.split()
    steps = elake("sql", "select count(*) from steps", "--format", "csv", lake=lake).stdout.split()
    assert int(counts[1]) == sum(n for n, _ in reported) == 12
    assert int(steps[1]) == sum(s for _, s in reported)
    assert "demo-ckpt-10" in elake("tag", "--list", lake=lake).stdout
    members = elake("sql", "select count(*) from set_members", "--format", "csv", lake=lake).stdout.split()
    failed = elake("sql", "select count(*) from episodes where not success", "--format", "csv", lake=lake).stdout.split()
    assert int(members[1]) == min(int(failed[1]), 24)
