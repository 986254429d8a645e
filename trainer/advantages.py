"""GiGPO and GRPO advantages as one DuckDB query over the lake's ``episodes`` and ``steps``.

GiGPO (arXiv 2505.10978) gives each step two baselines without a critic: the other episodes
of its group (same task, same batch: ``episodes.group_id``), and the other steps of the group
that stood at the same anchor state (``steps.anchor_key``). Both are partitions, so the whole
computation is window functions and group-bys, run where the data already is; the trainer
reads back one Arrow table. The equations follow the reference trainer (ClawGUI-RL's GiGPO),
including its choices that are easy to get wrong, noted below.

Rows and rewards
----------------
A row is a step of an episode whose ``group_id`` is set (episodes without one are left out
and counted in ``stats["episodes_without_group"]``). An episode has L rows; t is a row's
``step`` counted from the episode's first step. Steps missing from the lake (the reference's
saver drops a step whose screenshot was empty) still count as time for discounting, with no
reward of their own; L counts the rows present.

The raw reward of a step is ``steps.step_reward`` (the judge's) when not null, else
``steps.reward`` (the environment's), else 0. The per-step reward r_t is::

    r_last = episodes.eval_score             (the task evaluation; the last step's raw reward
                                              when the episode has no eval_score)
    r_t    = raw_t / (L - 1)    for the other rows when normalize_step_rewards (the
                                              reference's step-reward judge normalisation),
                                              else raw_t

so an episode's reward R = sum_t r_t is the mean intermediate step reward plus the evaluation
(in [0, 2] with a {0, 1} judge), and just the evaluation when there is no judge and the
environment pays nothing before the end.

Revisits (``revisit_rewards=False``; the reference pays them): a progress judge pays a step
that moves toward the goal, and pays nothing, not a penalty, for one that moves away. A policy
can then farm it in a loop (open Settings: 1, back: 0, open Settings: 1, ...) and learns the
loop instead of the task. With revisits unpaid, an intermediate row's raw reward counts as 0
when the next row's ``anchor_key`` already occurred at this row or an earlier one of the
episode: the step led back to a state the episode had been in, so each state's progress is
paid once. Rows without anchor keys are paid as usual; the last row is the evaluation.

``episodes.episode_reward`` is not read: it is what the recorder was told, while R is
recomputed from the steps so both paths agree.

Branches (`elake branch`, the trainer's ``--branch failing``): an episode whose
``episodes.branch_step`` is K replayed its parent's steps 0..K-1 (the parent's actions, marked
``replayed`` in ``steps.info``). Those rows count in the branch's own rewards, R and returns
(the branch's outcome is its whole trajectory's), but are not rows of any group: they are the
parent's steps, which the parent's own rows already stand for, so they never count twice in
an anchor group, never move a group's mean and get no advantage (nothing is learned from an
action the policy did not take). The branch's step K, taken on the parent's screen at K, joins
the parent's anchor group. An episodes relation without a ``branch_step`` column has no
branches.

Invalid actions (``steps.action_valid`` false; null counts as valid) cost ``invalid_penalty``,
subtracted from that step's row in both terms, as the reference does::

    S_{i,t} = R_i - p * invalid_{i,t}                                  (episode score of a row)
    G_t     = sum_{k >= t} gamma^(k-t) r_k  -  p * invalid_t           (discounted return)

Normalisation
-------------
``norm(v; V)`` is ``v - mean(V)`` for ``mode="mean_norm"`` and
``(v - mean(V)) / (std(V) + epsilon)`` for ``mode="mean_std_norm"``, with std the sample
(n - 1) standard deviation.

- Episode term: A^E = norm(S_{i,t}; scores of all rows of the group). Rows, not episodes: a
  long episode weighs more in the group's mean, as in the reference. A group with one row
  uses mean 0 and std 1.
- Step term (GiGPO only): A^S = norm(G_t; returns of the rows of the group with the same
  anchor_key). A row alone in its anchor group, or without an anchor key, gets A^S = 0.
- A = A^E + step_advantage_w * A^S.

Estimators
----------
Every estimator shares the episode term; they differ in the step term, and `ESTIMATORS` is
their registry (``AdvantageConfig.algo`` names one):

- ``gigpo``: episode + anchor-state terms, A^S as above (GiGPO)
- ``grpo``: episode term only, A = A^E (A^S reported as 0; GRPO)

A new estimator is its step term (SQL over a row ``r`` of ``scored`` and its anchor group
``a``: ``n``, ``mean``, ``std``), an entry in `ESTIMATORS`, its name in `Algo` (the enum the
CLI and the API show; a test keeps the two equal) and its branch in the plain-Python
specification (trainer/reference_advantages.py), which tests/trainer/test_advantages.py
compares with every registered estimator.

Dynamic sampling (DAPO), when asked: groups whose episode rewards R are all equal (within
1e-9) carry no signal and are dropped before anything is normalised; a one-episode group is
such a group.

Discounted returns in SQL
-------------------------
G_t = (sum_{k >= t} gamma^k r_k) / gamma^t: one window, a suffix sum over the episode's rows
in step order. A suffix sum adds the same terms the recursion G_t = r_t + gamma G_{t+1} adds
(no difference of two large prefix sums), so it is as exact as the recursion while gamma^k
stays a normal double: up to log(1e-300) / log(gamma) steps (13,000 at gamma = 0.95). Longer
episodes are refused with that limit in the message rather than silently losing precision.
Everything per episode (L, the last step, R) and per group is a GROUP BY joined back, which
DuckDB does much faster than partition-wide window aggregates. R is computed as
r_last + (sum of the other raw rewards) * scale, the same sum in another order.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ConfigDict, Field

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.spec_model import SpecModel

Algo = Literal["gigpo", "grpo"]
Mode = Literal["mean_norm", "mean_std_norm"]
EPISODE_COLUMNS = ("episode_id", "group_id", "eval_score")
STEP_COLUMNS = ("episode_id", "step", "reward", "step_reward", "anchor_key", "action_valid")
OUTPUT_COLUMNS = (
    "episode_id",
    "step",
    "advantage",
    "episode_advantage",
    "step_advantage",
    "anchor_group_size",
    "discounted_return",
    "reward",
)

#: Episode rewards closer than this count as equal for dynamic sampling.
EQUAL_REWARD_TOLERANCE = 1e-9
#: Smallest gamma^k the suffix-sum formulation may rely on (well above the subnormals).
_SMALLEST_POWER = 1e-300


@dataclass(frozen=True)
class Estimator:
    """An advantage estimator: its name, one line on what it adds up, and its step term:
    `step_term(mode)` is the SQL of A^S for a row ``r`` and its anchor group ``a``, or None
    when the estimator has none (A^S = 0)."""

    name: str
    summary: str
    step_term: Callable[[str], str] | None


def _anchor_state_term(mode: str) -> str:
    """GiGPO's A^S: G_t normalised within the row's anchor group; 0 for a group of one."""
    return ("CASE WHEN coalesce(a.n, 1) = 1 THEN 0.0 ELSE "
            + _normalise_sql("r.discounted_return", "a.mean", "a.std", mode) + " END")


#: Every advantage estimator, by the name `AdvantageConfig.algo` takes.
ESTIMATORS: dict[str, Estimator] = {e.name: e for e in (
    Estimator("gigpo", "episode + anchor-state terms", _anchor_state_term),
    Estimator("grpo", "episode term only", None),
)}


class AdvantageConfig(SpecModel):
    """The settings of the advantage equations above: their only definition, with their
    defaults and checks.

    `compute_advantages`, the plain-Python specification, `TrainConfig.advantages` and
    `elake train`'s flags all take this model. Its defaults are the trainer's tuned set
    (`TUNED_ADVANTAGES`); `REFERENCE_ADVANTAGES` is the reference trainer's, which differs in
    two settings (why: docs/training.md).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    algo: Algo = Field(
        "gigpo", description="advantage estimator: " + " or ".join(
            f"{e.name} ({e.summary})" for e in ESTIMATORS.values()))
    mode: Mode = Field(
        "mean_norm", description="normalisation: v - mean, or (v - mean) / (std + epsilon)")
    gamma: float = Field(0.95, ge=0.0, le=1.0, description="discount of the step returns")
    step_advantage_w: float = Field(1.0, description="weight of the anchor-state term "
                                    "(gigpo only): A = A^E + w * A^S")
    invalid_penalty: float = Field(0.1, ge=0.0, description="subtracted from steps whose "
                                   "action was invalid")
    normalize_step_rewards: bool = Field(
        False, description="divide intermediate step rewards by the episode's steps minus one, "
        "as the reference does; off by default (on with --reference-defaults): it pays one good "
        "step and an immediate stop as much as a whole task's progress, and policies learn to "
        "stop early")
    revisit_rewards: bool = Field(
        False, description="pay a step's judge reward also when it leads back to a state the "
        "episode was already in (anchor_key), as the reference does; off by default (on with "
        "--reference-defaults): a loop such as open Settings, back, open Settings is paid "
        "once, so a policy cannot farm the judge instead of doing the task")
    dynamic_sampling: bool = Field(False, description="drop groups whose episodes all got the "
                                   "same reward (DAPO's dynamic sampling)")
    epsilon: float = Field(1e-6, gt=0.0, description="added to the std in mean_std_norm "
                           "(keeps std = 0 finite)")

    def replace(self, **changes: Any) -> AdvantageConfig:
        """These settings with `changes`, checked like any other."""
        return type(self)(**{**self.model_dump(), **changes})


#: The trainer's defaults (`elake train` without advantage flags).
TUNED_ADVANTAGES = AdvantageConfig()
#: The reference trainer's equations (`elake train --reference-defaults`): step rewards
#: normalised by the episode's length, revisits paid.
REFERENCE_ADVANTAGES = TUNED_ADVANTAGES.replace(normalize_step_rewards=True, revisit_rewards=True)


class AdvantageResult:
    """What :func:`compute_advantages` returns.

    `table`: one row per kept step (OUTPUT_COLUMNS; ``discounted_return`` is G_t after the
    invalid penalty, ``reward`` the r_t used), in no particular order: join on
    (episode_id, step), or sort (sorting a million rows costs as much as the computation).
    Group ids and anchor keys are left out: they are the caller's own columns, and each
    would be one more string per row to turn into Arrow.
    `group_summary`: one row per episode group, dropped ones included (``dropped``).
    `anchor_group_sizes`: over kept rows, how many anchor groups have each size and how many
    steps sit in them. `stats`: the headline numbers, ready to log as metrics.

    The summaries are computed from the query's rows on first use: a consumer that only
    needs the advantages (a trainer step on a million rows) does not pay for them.
    """

    def __init__(self, rows: pa.Table, group_ids: pa.ChunkedArray, ungrouped: int):
        self._rows = rows
        self._group_ids = group_ids
        self._ungrouped = ungrouped
        if pc.any(rows["dropped"]).as_py():  # only dynamic sampling drops rows
            rows = rows.filter(pc.invert(rows["dropped"]))
        self.table: pa.Table = rows.select(list(OUTPUT_COLUMNS))

    @cached_property
    def group_summary(self) -> pa.Table:
        rows = self._rows
        size = rows["anchor_group_size"]
        per_row = pa.table(
            {
                "gid": rows["gid"],
                "episodes": rows["is_last"].cast(pa.int64()),  # one last step per episode
                "episode_reward": rows["episode_reward"],
                "dropped": rows["dropped"],
                # Each row of an anchor group of n rows adds 1/n: the sum counts anchor groups.
                "anchor_groups": pc.divide(1.0, size.cast(pa.float64())),
                "singleton_steps": pc.equal(size, 1).cast(pa.int64()),
                "anchor_group_size": size,
            }
        )
        grouped = (
            per_row.group_by("gid")
            .aggregate(
                [
                    ("episodes", "sum"),
                    ("episode_reward", "count"),
                    ("episode_reward", "min"),
                    ("episode_reward", "max"),
                    ("dropped", "any"),
                    ("anchor_groups", "sum"),
                    ("singleton_steps", "sum"),
                    ("anchor_group_size", "max"),
                ]
            )
            .sort_by("gid")
        )
        return pa.table(
            {
                "group_id": self._group_ids.take(pc.subtract(grouped["gid"], 1)),
                "episodes": grouped["episodes_sum"],
                "steps": grouped["episode_reward_count"],
                "min_episode_reward": grouped["episode_reward_min"],
                "max_episode_reward": grouped["episode_reward_max"],
                "dropped": grouped["dropped_any"],
                "anchor_groups": pc.round(grouped["anchor_groups_sum"]).cast(pa.int64()),
                "singleton_steps": grouped["singleton_steps_sum"],
                "largest_anchor_group": grouped["anchor_group_size_max"],
            }
        )

    @cached_property
    def anchor_group_sizes(self) -> pa.Table:
        histogram = (
            pa.table({"anchor_group_size": self.table["anchor_group_size"]})
            .group_by("anchor_group_size")
            .aggregate([("anchor_group_size", "count")])
            .sort_by("anchor_group_size")
        )
        counts = histogram["anchor_group_size_count"]
        return pa.table(
            {
                "anchor_group_size": histogram["anchor_group_size"],
                "anchor_groups": pc.divide(counts, histogram["anchor_group_size"]),
                "steps": counts,
            }
        )

    @cached_property
    def stats(self) -> dict[str, float]:
        table = self.table
        sizes = table["anchor_group_size"]
        dropped_groups = pc.sum(self.group_summary["dropped"].cast(pa.int64())).as_py() or 0
        singletons = pc.sum(pc.equal(sizes, 1).cast(pa.int64())).as_py() or 0
        return {
            "groups": self.group_summary.num_rows - dropped_groups,
            "groups_dropped": dropped_groups,
            "steps": table.num_rows,
            "steps_dropped": self._rows.num_rows - table.num_rows,
            "episodes_without_group": self._ungrouped,
            "mean_anchor_group_size": pc.mean(sizes).as_py() or 0.0,
            "singleton_step_fraction": singletons / table.num_rows if table.num_rows else 0.0,
        }


def compute_advantages(
    con: duckdb.DuckDBPyConnection,
    config: AdvantageConfig = TUNED_ADVANTAGES,
    *,
    steps: str | pa.Table = "steps",
    episodes: str | pa.Table = "episodes",
    where: str | None = None,
) -> AdvantageResult:
    """Advantages for every step of the selected episodes (equations in the module docstring),
    with `config`'s settings (the trainer's defaults unless given).

    `steps` and `episodes` are table or view names on `con` (the lake's SQL views) or Arrow
    tables. `where` is a SQL predicate over the episodes' columns choosing the episodes, e.g.
    ``"run_id = 'r7' AND policy_version = '12'"``; it is trusted SQL from the trainer, not
    user input.
    """
    with (
        _relation(con, episodes, "episodes") as episodes_sql,
        _relation(con, steps, "steps") as steps_sql,
    ):
        present = _check_columns(con, episodes_sql, EPISODE_COLUMNS, "episodes")
        _check_columns(con, steps_sql, STEP_COLUMNS, "steps")
        selected = f"({where})" if where else "TRUE"
        branch_step = "branch_step" if "branch_step" in present else "NULL::INTEGER"
        sql = _advantage_sql(episodes_sql, steps_sql, selected, config, branch_step)
        parameters = {
            "gamma": float(config.gamma),
            "w": float(config.step_advantage_w),
            "penalty": float(config.invalid_penalty),
            "epsilon": float(config.epsilon),
            "tolerance": EQUAL_REWARD_TOLERANCE,
        }
        # DuckDB refuses parameters the statement does not use (gamma 0/1, mean_norm).
        used = {name: value for name, value in parameters.items() if f"${name}" in sql}
        rows = con.sql(sql, params=used).to_arrow_table()
        _check_span(rows, config.gamma)
        # One pass over the episodes: the sorted group ids (gid is the dense rank of group_id,
        # so group gid is row gid - 1) and, in the null group, the episodes without one.
        groups = con.sql(
            f"SELECT group_id, count(*) AS episodes FROM {episodes_sql} WHERE {selected} "
            "GROUP BY group_id ORDER BY group_id NULLS LAST"
        ).to_arrow_table()
    grouped = groups.filter(pc.is_valid(groups["group_id"]))
    ungrouped = groups["episodes"][-1].as_py() if grouped.num_rows < groups.num_rows else 0
    return AdvantageResult(rows, grouped["group_id"], ungrouped)


@contextmanager
def _relation(con: duckdb.DuckDBPyConnection, source: str | pa.Table, role: str) -> Iterator[str]:
    """SQL text naming `source`: a quoted table name, or an Arrow table registered for the call."""
    if isinstance(source, pa.Table):
        name = f"_advantages_{role}_{uuid.uuid4().hex}"
        con.register(name, source)
        try:
            yield name
        finally:
            con.unregister(name)
        return
    if not isinstance(source, str) or not source:
        raise TypeError(f"{role}: expected a table name or a pyarrow.Table, got {source!r}")
    yield ".".join('"' + part.replace('"', '""') + '"' for part in source.split("."))


def _check_columns(
    con: duckdb.DuckDBPyConnection, relation: str, required: tuple[str, ...], role: str
) -> set[str]:
    """The relation's columns; refused when one of `required` is missing."""
    present = set(con.sql(f"SELECT * FROM {relation} LIMIT 0").columns)
    missing = [name for name in required if name not in present]
    if missing:
        raise InvalidInput(f"{role}: {relation} lacks column(s) {missing}; needs {list(required)}")
    return present


def _check_span(rows: pa.Table, gamma: float) -> None:
    """Refuse episodes long enough for gamma^t to leave the normal doubles."""
    if gamma in (0.0, 1.0) or rows.num_rows == 0:
        return
    limit = int(math.log(_SMALLEST_POWER) / math.log(gamma))
    longest = pc.max(rows["t"]).as_py()
    if longest > limit:
        raise InvalidInput(
            f"gamma: an episode spans {longest + 1} steps; with gamma={gamma} discounted "
            f"returns stay exact only up to {limit + 1} steps. Raise gamma or split the episodes."
        )


def _return_sql(gamma: float) -> str:
    """G_t before the invalid penalty, as a window over the episode's rows."""
    following = (
        "OVER (PARTITION BY eid ORDER BY t ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)"
    )
    if gamma == 0.0:
        return "reward"
    if gamma == 1.0:
        return f"sum(reward) {following}"
    return f"sum(reward * pow($gamma, t)) {following} / pow($gamma, t)"


def _normalise_sql(value: str, mean: str, std: str, mode: str) -> str:
    if mode == "mean_norm":
        return f"({value} - {mean})"
    return f"(({value} - {mean}) / ({std} + $epsilon))"


def _advantage_sql(episodes: str, steps: str, selected: str, config: AdvantageConfig,
                   branch_step: str = "NULL::INTEGER") -> str:
    """The whole computation; one row per step of every selected group, dropped ones flagged.

    Episodes and groups get integer ids up front so the window and the group-bys hash and sort
    integers; the text ids are joined back at the end. A branch's replayed rows (step below
    `branch_step`, the episodes' column or NULL) take part in its rewards and returns only.
    """
    scale = "1.0 / (len - 1)" if config.normalize_step_rewards else "1.0"
    episode_term = _normalise_sql(
        "r.score",
        "CASE WHEN g.n = 1 THEN 0.0 ELSE g.mean END",
        "CASE WHEN g.n = 1 THEN 1.0 ELSE g.std END",
        config.mode,
    )
    estimator = ESTIMATORS[config.algo]
    step_term = "0.0::DOUBLE" if estimator.step_term is None else estimator.step_term(config.mode)
    dropped = "g.uniform" if config.dynamic_sampling else "FALSE"
    rows = "step_rows" if config.revisit_rewards else "paid_rows"
    return f"""
    WITH selected_episodes AS (
        SELECT episode_id, group_id, CAST(eval_score AS DOUBLE) AS eval_score,
               {branch_step} AS branch_step,
               row_number() OVER () AS eid,
               dense_rank() OVER (ORDER BY group_id) AS gid
        FROM {episodes}
        WHERE group_id IS NOT NULL AND {selected}
    ),
    step_rows AS (
        SELECT e.eid, e.gid, s.step, s.anchor_key, e.eval_score,
               coalesce(CAST(s.step_reward AS DOUBLE), CAST(s.reward AS DOUBLE), 0.0)
                   AS raw_reward,
               CASE WHEN s.action_valid IS FALSE THEN $penalty ELSE 0.0 END AS penalty,
               coalesce(s.step < e.branch_step, FALSE) AS replayed
        FROM {steps} s JOIN selected_episodes e ON s.episode_id = e.episode_id
    ),{_revisit_sql(config)}
    -- Per episode: L, its first and last step, and what the last step's reward becomes.
    episode_shape AS (
        SELECT eid, count(*) AS len, min(step) AS first_step, max(step) AS last_step,
               coalesce(any_value(eval_score), arg_max(raw_reward, step)) AS final_reward,
               sum(raw_reward) - arg_max(raw_reward, step) AS intermediate_raw_sum
        FROM {rows} GROUP BY eid
    ),
    episode_scale AS (
        SELECT *, CASE WHEN len > 1 THEN {scale} ELSE 0.0 END AS intermediate_scale
        FROM episode_shape
    ),
    rewarded AS (
        SELECT r.eid, r.gid, r.step, r.anchor_key, r.penalty, r.replayed,
               r.step - x.first_step AS t,
               r.step = x.last_step AS is_last,
               CASE WHEN r.step = x.last_step THEN x.final_reward
                    ELSE r.raw_reward * x.intermediate_scale END AS reward,
               x.final_reward + x.intermediate_raw_sum * x.intermediate_scale AS episode_reward
        FROM {rows} r JOIN episode_scale x ON r.eid = x.eid
    ),
    returned AS (
        SELECT eid, gid, step, anchor_key, t, is_last, reward, episode_reward, replayed,
               episode_reward - penalty AS score,
               {_return_sql(config.gamma)} - penalty AS discounted_return
        FROM rewarded
    ),
    -- a branch's replayed rows are its parent's steps: no row of any group
    scored AS (SELECT * EXCLUDE (replayed) FROM returned WHERE NOT replayed),
    episode_groups AS (
        SELECT gid, count(*) AS n, avg(score) AS mean, stddev_samp(score) AS std,
               max(episode_reward) - min(episode_reward) <= $tolerance AS uniform
        FROM scored GROUP BY gid
    ),
    anchor_groups AS (
        SELECT gid, anchor_key, count(*) AS n, avg(discounted_return) AS mean,
               stddev_samp(discounted_return) AS std
        FROM scored WHERE anchor_key IS NOT NULL GROUP BY gid, anchor_key
    ),
    advantaged AS (
        SELECT r.eid, r.gid, r.step, r.anchor_key, r.t, r.is_last,
               {episode_term} AS episode_advantage,
               {step_term} AS step_advantage,
               coalesce(a.n, 1) AS anchor_group_size,
               r.discounted_return, r.reward, r.episode_reward,
               {dropped} AS dropped
        FROM scored r
        JOIN episode_groups g ON r.gid = g.gid
        LEFT JOIN anchor_groups a ON r.gid = a.gid AND r.anchor_key = a.anchor_key
    )
    SELECT e.episode_id, r.step,
           r.episode_advantage + $w * r.step_advantage AS advantage,
           r.episode_advantage, r.step_advantage, r.anchor_group_size, r.discounted_return,
           r.reward, r.episode_reward, r.gid, r.t, r.is_last, r.dropped
    FROM advantaged r JOIN selected_episodes e ON r.eid = e.eid
    """


def _revisit_sql(config: AdvantageConfig) -> str:
    """`paid_rows`: `step_rows` with the raw reward of steps that led to a revisit set to 0."""
    if config.revisit_rewards:
        return ""
    return """
    ordered_rows AS (
        SELECT *, lead(anchor_key) OVER next AS next_key, lead(step) OVER next AS next_step
        FROM step_rows WINDOW next AS (PARTITION BY eid ORDER BY step)
    ),
    first_visits AS (
        SELECT eid, anchor_key, min(step) AS first_step
        FROM step_rows WHERE anchor_key IS NOT NULL GROUP BY eid, anchor_key
    ),
    paid_rows AS (
        SELECT r.* EXCLUDE (next_key, next_step, raw_reward),
               CASE WHEN v.first_step < r.next_step THEN 0.0 ELSE r.raw_reward END AS raw_reward
        FROM ordered_rows r
        LEFT JOIN first_visits v ON v.eid = r.eid AND v.anchor_key = r.next_key
    ),"""
