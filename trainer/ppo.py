r"""The policy-gradient loss: PPO's clipped surrogate on per-token log-probabilities.

Every policy scores a recorded action as a row of "tokens": a VLM's response tokens, or the
TinyPolicy's two decisions (the verb, then its argument). For token t of step i, with
advantage A_i (the same for all tokens of the step, as GiGPO and GRPO broadcast it) and ratio
rho = exp(log pi(t) - log pi_old(t))::

    L_clip = -min(rho * A_i, clip(rho, 1 - eps, 1 + eps_high) * A_i)
    L_kl   = exp(d) - d - 1,  d = log pi_ref(t) - log pi(t)     (the "k3" estimator: >= 0,
                                                                 unbiased for KL(pi || ref))
    loss   = token_mean(L_clip + kl_coef * L_kl) - entropy_coef * token_mean(H)

``old`` is the policy that produced the rollouts (log-probs computed once before the first
epoch, as verl recomputes them), so the first minibatch has rho = 1 and clipping only bites
as later minibatches and epochs move the policy away from it. ``eps_high`` > ``eps`` is
DAPO's "clip-higher": an action with a positive advantage may gain more probability in one
iteration than a symmetric range allows, which is what lets rare good actions (a 3% click)
be learned in a few iterations instead of tens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class TokenLogProbs:
    """Per-token log-probabilities of recorded actions, as a policy returns them.

    `logp`, `mask` and `entropy` are [steps, tokens]; `mask` is 1 where a token belongs to
    the action (0 for padding, and for steps the policy cannot score).
    """

    logp: torch.Tensor
    mask: torch.Tensor
    entropy: torch.Tensor


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def ppo_loss(
    current: TokenLogProbs,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_eps: float,
    clip_eps_high: float | None = None,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    entropy_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss to minimise and its parts (floats, for the iteration's metrics).

    `old_logp` and `ref_logp` are [steps, tokens] like `current.logp`; `advantages` is
    [steps]. `clip_eps_high` defaults to `clip_eps` (the symmetric range).
    """
    high = clip_eps if clip_eps_high is None else clip_eps_high
    mask = current.mask.to(current.logp.dtype)
    delta = (current.logp - old_logp).masked_fill(mask == 0, 0.0)
    ratio = torch.exp(delta)
    advantage = advantages.to(current.logp.dtype).unsqueeze(1)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    policy_loss = masked_mean(-torch.minimum(ratio * advantage, clipped * advantage), mask)
    entropy = masked_mean(current.entropy, mask)
    loss = policy_loss - entropy_coef * entropy
    stats = {
        "policy_loss": policy_loss.item(),
        "entropy": entropy.item(),
        "clip_fraction": masked_mean(((ratio < 1.0 - clip_eps) | (ratio > 1.0 + high))
                                     .to(mask.dtype), mask).item(),
        "approx_kl_old": masked_mean(-delta, mask).item(),
        # k3 = (rho - 1) - log rho: >= 0 on every token, so a small batch cannot read as
        # "no movement" by cancellation the way the mean of -log rho can (--target-kl reads it)
        "kl_old": masked_mean(torch.expm1(delta) - delta, mask).item(),
    }
    if ref_logp is not None and kl_coef > 0:
        d = (ref_logp - current.logp).masked_fill(mask == 0, 0.0)
        kl = masked_mean(torch.exp(d) - d - 1.0, mask)
        loss = loss + kl_coef * kl
        stats["kl_ref"] = kl.item()
    stats["loss"] = loss.item()
    return loss, stats
