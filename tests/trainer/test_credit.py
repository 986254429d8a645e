"""Credit scores (trainer/credit.py) on fixed batches: the SQL rank arithmetic against a
pair-by-pair count, a case worked by hand, and the errors."""

from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pytest

from episodelake.trainer.advantages import ESTIMATORS, AdvantageConfig, compute_advantages
from episodelake.trainer.credit import Credit, score


def batch(episodes: list[dict], steps: list[dict]) -> tuple[pa.Table, pa.Table]:
    return pa.Table.from_pylist(episodes), pa.Table.from_pylist(steps)


def random_batch(seed: int) -> tuple[pa.Table, pa.Table]:
    rng = random.Random(seed)
    episodes, steps = [], []
    for version in ("1", "2", "3"):
        for group in ("g1", "g2"):
            for k in range(4):
                episode_id = f"{version}-{group}-{k}"
                episodes.append({"episode_id": episode_id, "group_id": f"{version}.{group}",
                                 "eval_score": float(rng.random() < 0.5), "policy_version": version})
                for step in range(rng.randint(2, 5)):
                    steps.append({"episode_id": episode_id, "step": step, "reward": None,
                                  "step_reward": float(rng.random() < 0.4),
                                  "anchor_key": rng.choice(["home", "settings", "wifi", None]),
                                  "action_valid": True})
    return batch(episodes, steps)


def pair_count(episodes: pa.Table, steps: pa.Table, config: AdvantageConfig, *, by_state: bool) -> float:
    """The definition, pair by pair: the share of (paid, unpaid) intermediate step pairs of one
    batch (and, by_state, one group and screen) whose paid step has the larger advantage."""
    con = duckdb.connect()
    con.register("e", episodes)
    con.register("s", steps)
    adv = compute_advantages(con, config, steps="s", episodes="e").table.to_pylist()
    meta = {r["episode_id"]: r for r in episodes.to_pylist()}
    keys = {(r["episode_id"], r["step"]): r["anchor_key"] for r in steps.to_pylist()}
    last = {}
    for r in adv:
        last[r["episode_id"]] = max(last.get(r["episode_id"], -1), r["step"])
    rows = [r for r in adv if r["step"] < last[r["episode_id"]]]

    def where(r):
        e = meta[r["episode_id"]]
        if by_state:
            return e["policy_version"], e["group_id"], keys[(r["episode_id"], r["step"])]
        return e["policy_version"]

    hits = pairs = 0.0
    for p in rows:
        for u in rows:
            if p["reward"] > 0 and not u["reward"] > 0 and where(p) == where(u):
                if by_state and where(p)[2] is None:
                    continue
                a, b = round(p["advantage"], 9), round(u["advantage"], 9)
                hits += 1.0 if a > b else 0.5 if a == b else 0.0
                pairs += 1
    return hits / pairs


@pytest.mark.parametrize("algo", list(ESTIMATORS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_rank_formula_equals_counting_every_pair(algo, seed):
    episodes, steps = random_batch(seed)
    config = AdvantageConfig(algo=algo)
    got = score(episodes, steps, config)
    assert got.overall == pytest.approx(pair_count(episodes, steps, config, by_state=False), abs=1e-12)
    assert got.within_state == pytest.approx(pair_count(episodes, steps, config, by_state=True), abs=1e-12)
    assert got.pairs > got.state_pairs > 0


def test_grpo_gives_a_paid_step_of_a_failed_episode_no_credit():
    """A succeeds, B fails; each has one paid and one unpaid step. GRPO gives every step of an
    episode the same advantage, so of the four (paid, unpaid) pairs it orders one right (A's
    paid over B's unpaid), one wrong, and ties two: 0.5, no credit."""
    episodes, steps = batch(
        [{"episode_id": "a", "group_id": "g", "eval_score": 1.0, "policy_version": "1"},
         {"episode_id": "b", "group_id": "g", "eval_score": 0.0, "policy_version": "1"}],
        [{"episode_id": e, "step": i, "reward": None, "step_reward": paid, "anchor_key": key,
          "action_valid": True}
         for e, marks in (("a", (1.0, 0.0, 0.0)), ("b", (0.0, 1.0, 0.0)))
         for i, (paid, key) in enumerate(zip(marks, ("s0", "s1", "s2"), strict=True))])
    grpo = score(episodes, steps, AdvantageConfig(algo="grpo"))
    assert (grpo.overall, grpo.pairs) == (0.5, 4)
    assert (grpo.within_state, grpo.state_pairs) == (0.5, 2)  # s0: a over b (right); s1: b under a


def test_a_batch_without_paid_steps_has_no_pairs_and_missing_columns_are_named():
    episodes, steps = batch(
        [{"episode_id": "a", "group_id": "g", "eval_score": 1.0, "policy_version": "1"}],
        [{"episode_id": "a", "step": i, "reward": None, "step_reward": 0.0, "anchor_key": "s",
          "action_valid": True} for i in range(3)])
    assert score(episodes, steps, AdvantageConfig()) == Credit(None, 0, None, 0)
    with pytest.raises(ValueError, match="policy_version"):
        score(episodes.drop_columns(["policy_version"]), steps, AdvantageConfig())
    with pytest.raises(ValueError, match="anchor_key"):
        score(episodes, steps.drop_columns(["anchor_key"]), AdvantageConfig())
