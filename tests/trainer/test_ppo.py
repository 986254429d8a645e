"""The PPO-clip loss on hand-built log-probabilities."""

from __future__ import annotations

import math

import pytest
import torch

from episodelake.trainer.ppo import TokenLogProbs, ppo_loss


def _logprobs(values, mask=None):
    logp = torch.tensor(values, requires_grad=True)
    mask = torch.ones_like(logp) if mask is None else torch.tensor(mask)
    return TokenLogProbs(logp, mask, torch.zeros_like(logp))


def test_at_ratio_one_the_gradient_follows_the_advantage():
    current = _logprobs([[-1.0], [-2.0]])
    loss, stats = ppo_loss(current, current.logp.detach(), torch.tensor([1.0, -1.0]),
                           clip_eps=0.2)
    loss.backward()
    assert loss.item() == pytest.approx(0.0)  # -(1 * 1 + 1 * -1) / 2
    assert current.logp.grad[0, 0] < 0 < current.logp.grad[1, 0]  # descent raises row 0
    assert stats["clip_fraction"] == 0.0


def test_clipping_stops_the_gradient_beyond_the_range():
    old = torch.tensor([[math.log(0.5)]])
    current = _logprobs([[math.log(0.9)]])  # ratio 1.8 > 1.2 with a positive advantage
    loss, stats = ppo_loss(current, old, torch.tensor([2.0]), clip_eps=0.2)
    loss.backward()
    assert loss.item() == pytest.approx(-1.2 * 2.0)
    assert current.logp.grad[0, 0] == 0.0
    assert stats["clip_fraction"] == 1.0


def test_padding_and_unscored_tokens_do_not_count():
    current = _logprobs([[-1.0, -5.0], [-1.0, 0.0]], mask=[[1.0, 0.0], [1.0, 1.0]])
    loss, _ = ppo_loss(current, current.logp.detach(), torch.tensor([1.0, 1.0]), clip_eps=0.2)
    loss.backward()
    assert current.logp.grad[0, 1] == 0.0
    assert loss.item() == pytest.approx(-1.0)  # token mean over 3 real tokens of -1 each


def test_kl_to_the_reference_is_zero_at_the_reference_and_positive_elsewhere():
    current = _logprobs([[-1.0, -2.0]])
    same, stats = ppo_loss(current, current.logp.detach(), torch.zeros(1), clip_eps=0.2,
                           ref_logp=current.logp.detach(), kl_coef=0.5)
    assert stats["kl_ref"] == pytest.approx(0.0)
    _, stats = ppo_loss(current, current.logp.detach(), torch.zeros(1), clip_eps=0.2,
                        ref_logp=torch.tensor([[-1.5, -1.0]]), kl_coef=0.5)
    assert stats["kl_ref"] > 0.0


def test_clip_higher_lets_a_good_action_gain_more_than_it_may_lose():
    old = torch.tensor([[math.log(0.1)], [math.log(0.1)]])
    current = _logprobs([[math.log(0.15)], [math.log(0.15)]])  # ratio 1.5 on both rows
    loss, stats = ppo_loss(current, old, torch.tensor([1.0, -1.0]), clip_eps=0.2,
                           clip_eps_high=0.8)
    loss.backward()
    assert current.logp.grad[0, 0] < 0  # inside the wider upper range: still pushed up
    assert current.logp.grad[1, 0] > 0  # a bad action's rise is always penalised
    assert stats["clip_fraction"] == 0.0
    _, symmetric = ppo_loss(current, old, torch.tensor([1.0, -1.0]), clip_eps=0.2)
    assert symmetric["clip_fraction"] == 1.0
