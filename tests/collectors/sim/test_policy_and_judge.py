"""The demo policy (oracle plus noise, MAI-UI text) and the rule-based step judge."""

from __future__ import annotations

from collections import Counter

import pytest

from episodelake.collectors.agents.oracle import (
    NOISE_KINDS,
    DemoPolicy,
    NoiseConfig,
)
from episodelake.collectors.envs.sim import navigation as nav
from episodelake.collectors.envs.sim.judge import RuleJudge
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.tasks import all_tasks, get_task, sample_tasks
from episodelake.lake.storage.errors import NotFound
from episodelake.lake.vocab.families import format_tool_call
from episodelake.lake.vocab.families import parse_response as parse

TASK = "message_send[contact=Jon Park,text=On my way]"


def parse_response(text: str) -> dict:
    parsed = parse(text)
    assert parsed.valid, parsed.error
    return parsed.action


def test_response_is_mai_ui_text_and_parses_back():
    arguments = {"action": "click", "coordinate": [500, 120]}
    text = format_tool_call(arguments, "I will tap it.")
    assert text.startswith("<thinking>\nI will tap it.\n</thinking>\n<tool_call>\n")
    assert parse_response(text) == arguments


def test_noiseless_policy_is_the_oracle_with_integer_coordinates():
    task = get_task(TASK)
    phone = Phone(0)
    task.setup(phone)
    policy = DemoPolicy(task)
    for _ in range(30):
        expected = task.solution(phone)
        decision = policy.decide(phone)
        assert decision.arguments == expected and decision.noise is None
        assert parse_response(decision.response) == expected
        if "coordinate" in expected:
            assert all(isinstance(v, int) and 0 <= v <= 999 for v in expected["coordinate"])
        assert decision.response.startswith("<thinking>")
        if phone.step(parse_response(decision.response)).done:
            break
    assert phone.state.terminated == "success" and task.check(phone)


def test_thinking_names_what_is_tapped():
    task = get_task("wifi_on")
    phone = Phone(0)
    task.setup(phone)
    assert 'tap "Settings"' in DemoPolicy(task).decide(phone).thinking


def _rollouts(noise: NoiseConfig, episodes: int = 30, max_steps: int = 15):
    kinds: Counter[str | None] = Counter()
    successes = 0
    for i, task in enumerate(sample_tasks(episodes, seed=4)):
        phone = Phone(i)
        task.setup(phone)
        policy = DemoPolicy(task, noise, seed=i)
        for _ in range(max_steps):
            decision = policy.decide(phone)
            kinds[decision.noise] += 1
            if phone.step(decision.arguments).done:
                break
        successes += phone.state.terminated == "success" and task.check(phone)
    return kinds, successes / episodes


def test_demo_noise_makes_every_failure_kind_and_a_mixed_success_rate():
    kinds, success = _rollouts(NoiseConfig.demo())
    assert set(NOISE_KINDS) <= set(kinds)
    assert 0.3 <= success <= 0.9


def test_policy_is_deterministic_for_a_seed():
    first = _rollouts(NoiseConfig.demo(), episodes=8)
    assert _rollouts(NoiseConfig.demo(), episodes=8) == first


def test_noise_config_is_checked():
    with pytest.raises(ValueError):
        NoiseConfig(grounding=0.8, planning=0.5)
    with pytest.raises(ValueError):
        NoiseConfig(loop=-0.1)


# --- judge -------------------------------------------------------------------------------------

def _step(phone: Phone, action: dict):
    before = phone.snapshot()
    phone.step(action)
    return before, action, phone.snapshot()


def test_judge_rewards_oracle_steps_and_not_detours():
    task = get_task(TASK)
    judge = RuleJudge()
    phone = Phone(0)
    task.setup(phone)
    score, reason = judge.judge(task.goal, *_step(phone, task.solution(phone)))
    assert score == 1 and reason.startswith("progress")
    score, reason = judge.judge(task.goal, *_step(phone, {"action": "open", "text": "Shop"}))
    assert score == 0 and reason.startswith("moved away")
    score, reason = judge.judge(task.goal, *_step(phone, {"action": "wait"}))
    assert score == 0 and reason.startswith("no progress")


def test_judge_scores_terminate_answers_and_invalid_actions():
    judge = RuleJudge()
    task = get_task("contact_phone[name=Anna Lee]")
    phone = Phone(0)
    task.setup(phone)
    assert judge.judge(task, *_step(phone, {"action": "terminate", "status": "success"})) == \
        (0, "terminated before the goal was reached")
    phone = Phone(0)
    task.setup(phone)
    assert judge.judge(task, *_step(phone, {"action": "click", "coordinate": [2000, 5]}))[0] == 0
    assert judge.judge(task, phone.snapshot(), None, phone.snapshot()) == (0, "the response has no parsable action")
    for _ in range(20):
        action = task.solution(phone)
        score, reason = judge.judge(task, *_step(phone, action))
        assert score == 1, (action, reason)
        if action["action"] == "terminate":
            assert reason == "terminated with the goal reached"
            break
    with pytest.raises(NotFound, match="no simulated task has the goal"):
        judge.judge("Fly to the moon.", phone.snapshot(), {"action": "wait"}, phone.snapshot())


def test_judge_distance_is_zero_once_done():
    task = get_task("wifi_on")
    phone = Phone(0)
    judge = RuleJudge()
    assert judge.distance(task, phone.snapshot()) == 0  # Wi-Fi is on by default
    task.setup(phone)
    assert judge.distance(task, phone.snapshot()) == 3


def test_a_state_reached_again_later_is_a_lookup_with_the_same_distance():
    """The judge remembers distances without the clock: a contact card opened and left again
    (the list seen at a later time) is looked up, not replayed, and every distance equals what
    a judge that remembers nothing finds."""
    task = next(t for t in all_tasks() if t.name == "favourite_contacts")
    phone = Phone(0)
    task.setup(phone)
    phone.step({"action": "open", "text": "Contacts"})
    judge = RuleJudge()
    first = judge.distance(task, phone.snapshot())
    replays = judge.replays
    seen = []
    for _ in range(3):  # into a contact's card and back, three times
        phone.step(nav.tap(phone, "contact_c01"))
        phone.step({"action": "system_button", "button": "back"})
        seen.append(phone.snapshot())
    assert len({s.clock_s for s in seen}) == 3  # the clock moved on
    assert [judge.distance(task, s) for s in seen] == [first] * 3
    assert judge.replays == replays  # the list at later times: lookups
    for action in (nav.tap(phone, "contact_c01"), {"action": "click", "coordinate": [100, 700]}):
        phone.step(action)
        assert judge.distance(task, phone.snapshot()) == RuleJudge().distance(task, phone.snapshot())
