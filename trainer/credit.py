"""How good an algorithm's credit assignment is on a batch, measured against the judge.

The simulated phone's judge pays each intermediate step that moves toward the goal (with
revisits unpaid, each state's progress once). Those marks are ground truth for step-level
credit, so an advantage function can be scored on recorded rollouts without training
anything: over every pair (paid step, unpaid step), how often does the paid one get the
larger advantage? 0.5 is no credit at all, 1.0 is the judge's own order. Scored twice:
over all of an iteration's intermediate steps, and over pairs from one screen state (one
anchor group), where GiGPO's step term should matter and GRPO's one-number-per-episode
cannot. Both algorithms can be scored on the same rollouts, so the difference is the credit
alone, not what each one's policy happened to play.

The score is the Mann-Whitney U statistic over average ranks (ties count half), summed over
the comparison groups and divided by the pairs they hold; last steps are left out (their
reward is the task's outcome, not a judge's step mark).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pyarrow as pa

from episodelake.lake.storage.errors import InvalidInput
from episodelake.trainer.advantages import (
    EPISODE_COLUMNS,
    STEP_COLUMNS,
    AdvantageConfig,
    compute_advantages,
)

_PAIRS_SQL = """
WITH ranked AS (
    SELECT {by}, progress,
           rank() OVER same + (count(*) OVER (PARTITION BY {by}, advantage) - 1) / 2.0 AS r
    FROM credit_steps {where} WINDOW same AS (PARTITION BY {by} ORDER BY advantage)
),
per_group AS (
    SELECT {by}, count(*) FILTER (WHERE progress) AS pos, count(*) FILTER (WHERE NOT progress) AS neg,
           coalesce(sum(r) FILTER (WHERE progress), 0) AS rank_sum
    FROM ranked GROUP BY ALL
)
SELECT sum(rank_sum - pos * (pos + 1) / 2.0) / nullif(sum(pos * neg), 0), coalesce(sum(pos * neg), 0)
FROM per_group
"""


@dataclass(frozen=True)
class Credit:
    """The share of (paid, unpaid) step pairs ordered as the judge orders them; None where
    there was no pair to compare."""

    overall: float | None
    pairs: int
    within_state: float | None
    state_pairs: int


def score(episodes: pa.Table, steps: pa.Table, config: AdvantageConfig, *,
          batch_column: str | None = "policy_version") -> Credit:
    """Score `config`'s advantages on recorded episodes and steps (EPISODE_COLUMNS plus
    `batch_column`, which names the batch an episode was trained in; STEP_COLUMNS). Pairs
    are only formed inside one batch: advantages of different batches are not comparable.
    `batch_column` None: the rows are one batch."""
    _check(episodes, steps, batch_column)
    con = duckdb.connect()
    try:
        con.register("e", episodes)
        con.register("s", steps)
        result = compute_advantages(con, config, steps="s", episodes="e")
    finally:
        con.close()
    return score_advantages(result.table, episodes, steps, batch_column=batch_column)


def score_advantages(advantages: pa.Table, episodes: pa.Table, steps: pa.Table, *,
                     batch_column: str | None = None) -> Credit:
    """Score advantages already computed (`compute_advantages(...).table` of these episodes
    and steps: its `reward` column, the step reward it paid, is the judge's mark)."""
    _check(episodes, steps, batch_column)
    batch = f'e."{batch_column}"' if batch_column else "0"
    con = duckdb.connect()
    try:
        con.register("adv", advantages.select(["episode_id", "step", "advantage", "reward"]))
        con.register("e", episodes.select(["episode_id", "group_id", *([batch_column] if batch_column else [])]))
        con.register("s", steps.select(["episode_id", "step", "anchor_key"]))
        con.execute(f"""
            CREATE TEMP TABLE credit_steps AS
            SELECT {batch} AS batch, e.group_id, s.anchor_key,
                   round(adv.advantage, 9) AS advantage,  -- equal up to summation order: a tie
                   adv.reward > 0 AS progress
            FROM adv JOIN e USING (episode_id) JOIN s USING (episode_id, step)
            QUALIFY adv.step < max(adv.step) OVER (PARTITION BY adv.episode_id)""")
        overall, pairs = con.execute(_PAIRS_SQL.format(by="batch", where="")).fetchall()[0]
        state, state_pairs = con.execute(_PAIRS_SQL.format(
            by="batch, group_id, anchor_key", where="WHERE anchor_key IS NOT NULL")).fetchall()[0]
    finally:
        con.close()
    return Credit(overall, int(pairs), state, int(state_pairs))


def _check(episodes: pa.Table, steps: pa.Table, batch_column: str | None) -> None:
    missing = {*EPISODE_COLUMNS, *([batch_column] if batch_column else [])} - set(episodes.column_names)
    missing |= set(STEP_COLUMNS) - set(steps.column_names)
    if missing:
        raise InvalidInput(f"credit: the batch lacks the column(s) {', '.join(sorted(missing))}")
