"""The GiGPO/GRPO advantage equations in plain Python: the executable specification.

:mod:`episodelake.trainer.advantages` computes the same numbers in SQL; this module exists so
the SQL has something independent to be checked against (the property tests) and timed
against (``bench/bench_advantages.py``). It reads like the equations, with loops over dicts and
no code shared with the SQL path but the settings' one definition (`AdvantageConfig`); the
trainer never calls it. The equations themselves are written out in
:mod:`episodelake.trainer.advantages`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from episodelake.trainer.advantages import REFERENCE_ADVANTAGES, AdvantageConfig

#: Episode rewards closer than this count as equal for dynamic sampling.
EQUAL_REWARD_TOLERANCE = 1e-9


def reference_advantages(
    episodes: Iterable[Mapping[str, Any]],
    steps: Iterable[Mapping[str, Any]],
    config: AdvantageConfig = REFERENCE_ADVANTAGES,
) -> list[dict[str, Any]]:
    """One dict per kept step, sorted by (episode_id, step), with the SQL path's columns; the
    reference trainer's settings unless `config` says otherwise."""
    algo, mode, gamma, epsilon = config.algo, config.mode, config.gamma, config.epsilon
    step_advantage_w, invalid_penalty = config.step_advantage_w, config.invalid_penalty
    normalize_step_rewards, revisit_rewards = config.normalize_step_rewards, config.revisit_rewards
    dynamic_sampling = config.dynamic_sampling
    episode_info = {e["episode_id"]: e for e in episodes if e.get("group_id") is not None}
    steps_of: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for step in steps:
        if step["episode_id"] in episode_info:
            steps_of[step["episode_id"]].append(step)

    rows = []
    for episode_id, episode_steps in steps_of.items():
        episode_steps = sorted(episode_steps, key=lambda s: s["step"])
        eval_score = episode_info[episode_id].get("eval_score")
        rewards = _step_rewards(episode_steps, eval_score, normalize_step_rewards, revisit_rewards)
        episode_reward = sum(rewards)
        returns = _discounted_returns(rewards, [s["step"] for s in episode_steps], gamma)
        branch_step = episode_info[episode_id].get("branch_step")
        for step, reward, ret in zip(episode_steps, rewards, returns, strict=True):
            if branch_step is not None and step["step"] < branch_step:
                continue  # a branch's replayed row: its parent's step, in no group
            penalty = invalid_penalty if step.get("action_valid") is False else 0.0
            rows.append(
                {
                    "episode_id": episode_id,
                    "step": step["step"],
                    "group_id": episode_info[episode_id]["group_id"],
                    "anchor_key": step.get("anchor_key"),
                    "reward": reward,
                    "episode_reward": episode_reward,
                    "score": episode_reward - penalty,
                    "discounted_return": ret - penalty,
                }
            )

    rows_of_group: dict[Any, list[dict]] = defaultdict(list)
    for row in rows:
        rows_of_group[row["group_id"]].append(row)
    if dynamic_sampling:
        for group_id, members in list(rows_of_group.items()):
            episode_rewards = [row["episode_reward"] for row in members]
            if max(episode_rewards) - min(episode_rewards) <= EQUAL_REWARD_TOLERANCE:
                del rows_of_group[group_id]

    kept = []
    for members in rows_of_group.values():
        scores = [row["score"] for row in members]
        if len(scores) == 1:
            mean, std = 0.0, 1.0
        else:
            mean, std = _mean(scores), _sample_std(scores)
        anchors: dict[Any, list[dict]] = defaultdict(list)
        for row in members:
            if row["anchor_key"] is not None:
                anchors[row["anchor_key"]].append(row)
        for row in members:
            row["episode_advantage"] = _normalise(row["score"], mean, std, mode, epsilon)
            cluster = anchors.get(row["anchor_key"], [row])
            row["anchor_group_size"] = len(cluster)
            if algo == "grpo" or len(cluster) == 1:
                row["step_advantage"] = 0.0
            else:
                cluster_returns = [r["discounted_return"] for r in cluster]
                row["step_advantage"] = _normalise(
                    row["discounted_return"],
                    _mean(cluster_returns),
                    _sample_std(cluster_returns),
                    mode,
                    epsilon,
                )
            row["advantage"] = row["episode_advantage"] + step_advantage_w * row["step_advantage"]
            kept.append(row)
    return sorted(kept, key=lambda row: (row["episode_id"], row["step"]))


def _step_rewards(
    steps: list[Mapping[str, Any]], eval_score: float | None, normalize: bool, revisits: bool
) -> list[float]:
    """r_t: the judge's step reward (else the env's), the last step the evaluation's; without
    `revisits`, 0 for a step whose next state's anchor key the episode has already seen."""
    length = len(steps)
    rewards = []
    seen: set[str] = set()
    for position, step in enumerate(steps):
        raw = step.get("step_reward")
        if raw is None:
            raw = step.get("reward")
        if raw is None:
            raw = 0.0
        if step.get("anchor_key") is not None:
            seen.add(step["anchor_key"])
        following = steps[position + 1].get("anchor_key") if position + 1 < length else None
        if not revisits and following in seen:
            raw = 0.0
        if position == length - 1:
            rewards.append(eval_score if eval_score is not None else raw)
        elif normalize:
            rewards.append(raw / (length - 1))
        else:
            rewards.append(raw)
    return rewards


def _discounted_returns(rewards: list[float], steps: list[int], gamma: float) -> list[float]:
    """G_t = r_t + gamma^(gap) * G_next from the last row back; gap is 1 unless steps are missing."""
    returns = [0.0] * len(rewards)
    following = 0.0
    for i in reversed(range(len(rewards))):
        gap = steps[i + 1] - steps[i] if i + 1 < len(steps) else 0
        following = rewards[i] + gamma**gap * following
        returns[i] = following
    return returns


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _sample_std(values: list[float]) -> float:
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _normalise(value: float, mean: float, std: float, mode: str, epsilon: float) -> float:
    if mode == "mean_norm":
        return value - mean
    return (value - mean) / (std + epsilon)
