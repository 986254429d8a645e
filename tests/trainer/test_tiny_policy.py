"""TinyPolicy: acting writes valid MAI-UI tool calls, scoring reads them back, learning moves
the probabilities the way the advantages say."""

from __future__ import annotations

import pickle

import pytest
import torch

from episodelake.collectors.envs.sim.device import SimDevice
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.tasks import get_task
from episodelake.collectors.loop import Observation
from episodelake.lake.storage.errors import NotFound
from episodelake.lake.vocab.families import parse_response
from episodelake.lake.vocab.prompts import HistoryStep
from episodelake.trainer.policies.base import Sample
from episodelake.trainer.policies.tiny import (
    CELLS,
    POINT_VERBS,
    VERBS,
    TinyConfig,
    TinyPolicy,
    cell_centre,
    cell_of,
    text_spans,
)
from episodelake.trainer.ppo import ppo_loss

GOAL = 'Create a note titled "Groceries" with the text "call mom".'


@pytest.fixture(scope="module")
def screen() -> bytes:
    phone = Phone(0)
    get_task("wifi_on").setup(phone)
    return phone.screenshot()


def _samples(policy: TinyPolicy, screen: bytes, goal: str, n: int,
             seed: int | None = None) -> list[Sample]:
    history: list[HistoryStep] = []
    samples = []
    for step in range(n):
        response = policy.act(Observation(goal, step, screen, list(history), {}, seed)).response
        samples.append(Sample("e0", step, goal, screen, tuple(h.response for h in history), (),
                              response, 1.0))
        history.append(HistoryStep(response=response, image=step))
    return samples


def test_spans_offer_quoted_text_first_with_its_context():
    spans = text_spans(GOAL)
    assert [s.text for s in spans[:2]] == ["Groceries", "call mom"]
    assert "before=titled" in spans[0].features and "quoted=True" in spans[0].features
    assert "Create a note" in [s.text for s in spans]


def test_cells_and_coordinates_agree():
    for cell in range(CELLS):
        assert cell_of(cell_centre(cell)) == cell


def test_act_writes_actions_the_parser_and_the_phone_accept(screen):
    policy = TinyPolicy(TinyConfig(seed=3))
    phone = Phone(0)
    seen = set()
    for response in (s.response for s in _samples(policy, screen, GOAL, 60)):
        parsed = parse_response(response)
        assert parsed.valid, response
        assert phone.clone().step(parsed.action).valid, parsed.action
        seen.add(parsed.action_type)
    assert "click" in seen and len(seen) >= 4


def test_every_response_it_writes_scores_back_to_its_choice(screen):
    policy = TinyPolicy()
    samples = _samples(policy, screen, GOAL, 40)
    prepared = policy.prepare(samples)
    assert all(item.verb >= 0 for item in prepared)
    for item, sample in zip(prepared, samples, strict=True):
        assert VERBS[item.verb].split("_")[0] in sample.response or VERBS[item.verb] in (
            "back", "home", "enter")
    scored = policy.score(prepared)
    assert scored.logp.shape == (40, 2) and bool((scored.mask[:, 0] == 1).all())
    with_argument = [VERBS[item.verb] in (*POINT_VERBS, "type", "open") for item in prepared]
    assert scored.mask[:, 1].bool().tolist() == with_argument  # the argument is its own token
    assert any(with_argument) and not all(with_argument)
    assert bool((scored.logp[scored.mask == 1] < 0).all())
    assert bool((scored.logp[scored.mask == 0] == 0).all())
    assert bool(torch.isfinite(scored.entropy).all())


def test_foreign_actions_are_left_unscored(screen):
    policy = TinyPolicy()
    foreign = [
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "type", "text": "nope"}}'
        '</tool_call>',
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "drag", '
        '"start_coordinate": [1, 2], "end_coordinate": [3, 4]}}</tool_call>',
        "not an action",
    ]
    prepared = policy.prepare([Sample("e", i, GOAL, screen, (), (), r, 1.0)
                               for i, r in enumerate(foreign)])
    assert policy.score(prepared).mask.sum() == 0


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_advantage_sign_moves_the_action_probability(screen, sign):
    policy = TinyPolicy()
    samples = _samples(policy, screen, "Turn on Wi-Fi.", 4)
    prepared = policy.prepare(samples)
    optimizer = torch.optim.SGD(policy.module.parameters(), lr=0.1)
    before = policy.score(prepared).logp.detach()
    advantages = torch.tensor([sign, 0.0, 0.0, 0.0])
    loss, _ = ppo_loss(policy.score(prepared), before, advantages, clip_eps=0.2)
    loss.backward()
    grads = [p.grad for p in policy.module.parameters() if p.grad is not None]
    assert grads and all(bool(torch.isfinite(g).all()) for g in grads)
    optimizer.step()
    change = policy.score(prepared).logp.detach()[0].sum() - before[0].sum()
    assert change * sign > 0


def test_same_seed_same_actions_and_agent_specs_survive_pickling(screen, tmp_path):
    first = _samples(TinyPolicy(TinyConfig(seed=5)), screen, GOAL, 5)
    again = _samples(TinyPolicy(TinyConfig(seed=5)), screen, GOAL, 5)
    assert [s.response for s in first] == [s.response for s in again]
    trained = TinyPolicy(TinyConfig(seed=5))
    spec = pickle.loads(pickle.dumps(trained.agent()))
    copy = spec.open(SimDevice(0))
    assert all(torch.equal(a, b) for a, b in zip(copy.module.state_dict().values(),
                                                 trained.module.state_dict().values(),
                                                 strict=True))
    assert spec.open(SimDevice(0)).module is copy.module  # one network per process
    # an episode's seed fixes its samples, whatever the copy sampled before
    _samples(copy, screen, GOAL, 3)
    seeded = [s.response for s in _samples(copy, screen, GOAL, 4, seed=11)]
    assert [s.response for s in _samples(spec.open(SimDevice(0)), screen, GOAL, 4, seed=11)] == seeded
    trained.save(tmp_path / "policy")
    loaded = TinyPolicy.load(tmp_path / "policy")
    assert loaded.config == trained.config
    assert all(torch.equal(a, b) for a, b in zip(loaded.module.state_dict().values(),
                                                 trained.module.state_dict().values(),
                                                 strict=True))
    with pytest.raises(NotFound, match="tiny_policy.json"):
        TinyPolicy.load(tmp_path)
