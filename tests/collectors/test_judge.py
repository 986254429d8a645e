"""The step-reward judge: strict parsing, retries on invalid answers, the cache, and the
back-fill job (and `elake judge`) against a loopback fake judge server."""

from __future__ import annotations

import json

import pytest

from episodelake.collectors.agents.judge import (
    JudgeCache,
    StepJudge,
    StepToJudge,
    parse_verdict,
)
from episodelake.collectors.agents.model_client import ModelClient, ModelOptions
from episodelake.collectors.jobs.backfill import backfill
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.curation import curation
from episodelake.lake.export.selection import select_episodes
from episodelake.lake.storage.errors import InvalidInput, NotFound, SqlRefused
from tests import factories
from tests.collectors.device_support import elake

QUICK = ModelOptions(timeout_s=2, max_retries=0)


def yes(reason="moved toward the goal"):
    return json.dumps({"reason": reason, "reward": 1})


def no(reason="nothing changed"):
    return json.dumps({"reason": reason, "reward": 0})


@pytest.mark.parametrize("text,reward", [
    ('{"reason": "ok", "reward": 1}', 1.0),
    ('```json\n{"reason": "ok", "reward": 0}\n```', 0.0),
    ('<think>hmm</think>\n{"reward": 1.0, "reason": "ok"}', 1.0),
])
def test_valid_verdicts(text, reward):
    verdict = parse_verdict(text)
    assert verdict.valid and verdict.reward == reward and verdict.reason == "ok"


@pytest.mark.parametrize("text,problem", [
    ("The step was good. Reward: 1", "not a JSON object"),
    ('{"reason": "ok", "reward": 0.5}', "'reward' must be 0 or 1, got 0.5"),
    ('{"reason": "ok", "reward": "1"}', "'reward' must be 0 or 1, got '1'"),
    ('{"reason": "ok", "reward": true}', "'reward' must be 0 or 1"),
    ('{"reason": "ok"}', "'reward' must be 0 or 1, got None"),
    ('{"reason": "", "reward": 1}', "'reason' must be a non-empty string"),
    ('[1]', "expected a JSON object"),
    ('{"reason": "ok", "reward": 1} and more', "not a JSON object"),
])
def test_invalid_verdicts_never_get_a_score(text, problem):
    verdict = parse_verdict(text)
    assert not verdict.valid and verdict.reward is None
    assert verdict.reason.startswith("invalid judge response: ") and problem in verdict.reason


def a_step(**changes) -> StepToJudge:
    fields = dict(goal="Turn on Wi-Fi", before=factories.screenshot(1), after=factories.screenshot(2),
                  response=factories.response("click"), action_type="click",
                  action='{"action": "click", "coordinate": [500, 500]}', x=0.5, y=0.5)
    return StepToJudge(**{**fields, **changes})


def test_judge_retries_invalid_answers_then_caches(fake_model, tmp_path):
    fake_model.script("sure, 1", yes())
    cache = JudgeCache(tmp_path / "verdicts.sqlite")
    judge = StepJudge(ModelClient(fake_model.url, "judge", options=QUICK), attempts=2, cache=cache)
    assert judge.judge(a_step()).reward == 1.0
    assert judge.judge(a_step()).reward == 1.0  # cached: no third request
    assert len(fake_model.requests) == 2
    request = fake_model.requests[0]
    assert request["temperature"] == 0.1
    parts = request["messages"][1]["content"]
    assert sum(p["type"] == "image_url" for p in parts) == 2
    assert "Goal: Turn on Wi-Fi" in parts[0]["text"] and "click (500, 500)" in parts[0]["text"]
    cache.close()
    # the file cache outlives the judge; another action or goal is another key
    again = StepJudge(ModelClient(fake_model.url, "judge", options=QUICK),
                      cache=JudgeCache(tmp_path / "verdicts.sqlite"))
    assert again.judge(a_step()).reason == "moved toward the goal"
    fake_model.script(no())
    assert again.judge(a_step(goal="Turn off Wi-Fi")).reward == 0.0
    assert len(fake_model.requests) == 3


def test_invalid_after_every_attempt_is_not_cached(fake_model):
    fake_model.script("?", "??", yes())
    judge = StepJudge(ModelClient(fake_model.url, "judge", options=QUICK), attempts=2)
    assert not judge.judge(a_step()).valid
    assert judge.judge(a_step()).valid


def record(lake, episodes: int, steps: int, **fields) -> list[str]:
    rec = Recorder(lake, anchor=None)
    ids = []
    for e in range(episodes):
        with rec.start_episode("wifi_on", "Turn on Wi-Fi", **fields) as ep:
            for s in range(steps):
                ep.log_step(factories.screenshot(10 * e + s), factories.response("click"))
            ep.finish(success=True, eval_score=1.0)
        ids.append(ep.episode_id)
    rec.close()
    return ids


def test_backfill_fills_rewards_keeps_images_and_resumes(lake, fake_model):
    ids = record(lake, 2, 3)
    before = {(i, s): lake.image(i, s)[0] for i in ids for s in range(3)}
    fake_model.script(yes(), "not json", "still not", "nor this", no(), yes())
    judge = StepJudge(ModelClient(fake_model.url, "judge", options=QUICK), attempts=3)
    report = backfill(lake, judge, ids, progress=False)
    assert (report.episodes, report.judged, report.invalid) == (2, 4, 1)
    rows = lake.sql("SELECT episode_id, step, step_reward, step_reward_reason FROM steps "
                    "ORDER BY episode_id, step").to_pylist()
    by_key = {(r["episode_id"], r["step"]): r for r in rows}
    assert by_key[(ids[0], 0)]["step_reward"] == 1.0
    invalid = by_key[(ids[0], 1)]
    assert invalid["step_reward"] is None and invalid["step_reward_reason"].startswith("invalid judge")
    assert by_key[(ids[1], 0)]["step_reward"] == 0.0
    assert by_key[(ids[0], 2)]["step_reward_reason"] is None  # a last step has no after screen
    assert len(rows) == 6
    assert {(i, s): lake.image(i, s)[0] for i in ids for s in range(3)} == before
    # a second run retries only what has no reward yet
    fake_model.script(yes())
    again = backfill(lake, judge, ids, progress=False)
    assert (again.episodes, again.judged, again.invalid) == (1, 1, 0)
    assert lake.sql("SELECT count(*) AS n FROM steps WHERE step_reward IS NULL").to_pylist() == [{"n": 2}]


def test_selecting_episodes(lake):
    ids = record(lake, 2, 2, run_id="r1")
    record(lake, 1, 2, run_id="r2")
    assert sorted(select_episodes(lake, where="run_id = 'r1'")) == sorted(ids)
    s = curation.create_set(lake, "wifi-fails", kind="failure")
    curation.add_member(lake, s["set_id"], ids[0])
    assert select_episodes(lake, set_name="wifi-fails") == [ids[0]]
    with pytest.raises(NotFound, match="no set named 'nope'"):
        select_episodes(lake, set_name="nope")
    with pytest.raises(SqlRefused, match="^where .no_such_column = 1.: .*no_such_column"):
        select_episodes(lake, where="no_such_column = 1")
    with pytest.raises(InvalidInput, match="give a set"):
        select_episodes(lake)


def test_elake_judge(lake, fake_model, capsys):
    record(lake, 1, 3, run_id="r1")
    fake_model.script(yes(), no())
    argv = ["--lake", str(lake.path), "judge", "--where", "run_id = 'r1'", "--model-url",
            fake_model.url, "--model", "judge"]
    assert elake(argv) == 0
    assert "judged 2 step(s) in 1 episode(s): 0 invalid" in capsys.readouterr().out
    rewards = lake.sql("SELECT step_reward FROM steps ORDER BY step")["step_reward"].to_pylist()
    assert rewards == [1.0, 0.0, None]
