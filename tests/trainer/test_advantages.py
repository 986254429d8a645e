"""GiGPO/GRPO advantages: the SQL path against the plain-Python specification, and by hand."""

from __future__ import annotations

import math
import re
import typing

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodelake.lake.storage.errors import InvalidInput
from episodelake.trainer import advantages
from episodelake.trainer.advantages import (
    ESTIMATORS,
    OUTPUT_COLUMNS,
    REFERENCE_ADVANTAGES,
    TUNED_ADVANTAGES,
    AdvantageConfig,
    Algo,
    compute_advantages,
)
from episodelake.trainer.reference_advantages import reference_advantages

EPISODES_SCHEMA = pa.schema(
    [("episode_id", pa.string()), ("group_id", pa.string()), ("eval_score", pa.float64())]
)
STEPS_SCHEMA = pa.schema(
    [
        ("episode_id", pa.string()),
        ("step", pa.int32()),
        ("reward", pa.float64()),
        ("step_reward", pa.float64()),
        ("anchor_key", pa.string()),
        ("action_valid", pa.bool_()),
    ]
)
NUMERIC = ("advantage", "episode_advantage", "step_advantage", "discounted_return", "reward")

#: One connection for the many small property-test examples (each call registers its own inputs).
CON = duckdb.connect()


def sql_rows(episodes: list[dict], steps: list[dict], **params) -> list[dict]:
    """The SQL path's rows; the hand-built cases below start from the reference's settings."""
    result = compute_advantages(
        CON,
        REFERENCE_ADVANTAGES.replace(**params),
        episodes=pa.Table.from_pylist(episodes, schema=EPISODES_SCHEMA),
        steps=pa.Table.from_pylist(steps, schema=STEPS_SCHEMA),
    )
    return sorted(result.table.to_pylist(), key=lambda row: (row["episode_id"], row["step"]))


def assert_same(got: list[dict], expected: list[dict]) -> None:
    assert [(r["episode_id"], r["step"]) for r in got] == [
        (r["episode_id"], r["step"]) for r in expected
    ]
    for a, b in zip(got, expected, strict=True):
        assert a["anchor_group_size"] == b["anchor_group_size"], (a, b)
        for column in NUMERIC:
            assert math.isclose(a[column], b[column], rel_tol=1e-9, abs_tol=1e-9), (column, a, b)


def step(episode_id, step, *, step_reward=None, reward=0.0, anchor="s", valid=True) -> dict:
    return {
        "episode_id": episode_id,
        "step": step,
        "reward": reward,
        "step_reward": step_reward,
        "anchor_key": anchor,
        "action_valid": valid,
    }


def episode(episode_id, group_id, eval_score) -> dict:
    return {"episode_id": episode_id, "group_id": group_id, "eval_score": eval_score}


# --- property test: SQL == plain Python on random batches --------------------------------

# Rewards on a 1/1000 grid: equal episode rewards are then equal up to rounding, far below the
# dynamic-sampling tolerance, so both implementations always drop the same groups.
rewards = st.integers(-2000, 2000).map(lambda v: v / 1000)


@st.composite
def batches(draw):
    episodes, steps = [], []
    for g in range(draw(st.integers(1, 4))):
        anchors = [f"a{i}" for i in range(draw(st.integers(1, 4)))]
        for e in range(draw(st.integers(1, 4))):
            episode_id = f"g{g}-e{e}"
            episodes.append(
                episode(
                    episode_id, f"g{g}", draw(st.none() | st.sampled_from([0.0, 1.0]) | rewards)
                )
            )
            length = draw(st.integers(1, 20))
            numbers = range(length)
            if draw(st.booleans()):  # steps missing from the lake
                numbers = sorted(draw(st.sets(st.integers(0, 25), min_size=1, max_size=length)))
            for n in numbers:
                steps.append(
                    step(
                        episode_id,
                        n,
                        step_reward=draw(st.none() | st.sampled_from([0.0, 1.0]) | rewards),
                        reward=draw(st.none() | rewards),
                        anchor=draw(st.none() | st.sampled_from(anchors)),
                        valid=draw(st.none() | st.booleans()),
                    )
                )
    episodes.append(episode("no-group", None, 1.0))
    steps.append(step("no-group", 0, step_reward=1.0))
    return episodes, steps


configs = st.builds(
    dict,
    algo=st.sampled_from(list(ESTIMATORS)),
    mode=st.sampled_from(["mean_norm", "mean_std_norm"]),
    gamma=st.sampled_from([0.0, 0.5, 0.95, 1.0]) | st.floats(0.01, 1.0),
    step_advantage_w=st.sampled_from([1.0, 0.5, 0.0, 2.0]),
    invalid_penalty=st.sampled_from([0.1, 0.0, 1.0]),
    normalize_step_rewards=st.booleans(),
    revisit_rewards=st.booleans(),
    dynamic_sampling=st.booleans(),
    epsilon=st.sampled_from([1e-6, 1e-3]),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches(), params=configs)
def test_sql_matches_the_plain_python_specification(batch, params):
    episodes, steps = batch
    assert_same(
        sql_rows(episodes, steps, **params),
        reference_advantages(episodes, steps, AdvantageConfig(**params)),
    )


# --- hand-built cases ---------------------------------------------------------------------


def two_episode_group() -> tuple[list[dict], list[dict]]:
    """e1: judge 1 then success (R = 1 + 1); e2: judge 1, 0 then failure (R = 0.5 + 0 + 0)."""
    episodes = [episode("e1", "g", 1.0), episode("e2", "g", 0.0)]
    steps = [
        step("e1", 0, step_reward=1.0, anchor="home"),
        step("e1", 1, step_reward=1.0, anchor="list"),
        step("e2", 0, step_reward=1.0, anchor="home"),
        step("e2", 1, step_reward=0.0, anchor="menu"),
        step("e2", 2, step_reward=0.0, anchor="other"),
    ]
    return episodes, steps


def test_worked_example_by_hand():
    episodes, steps = two_episode_group()
    rows = {(r["episode_id"], r["step"]): r for r in sql_rows(episodes, steps, gamma=0.5)}
    # rewards: e1 = [1/1, eval 1]; e2 = [1/2, 0/2, eval 0]
    assert [rows["e1", t]["reward"] for t in (0, 1)] == [1.0, 1.0]
    assert [rows["e2", t]["reward"] for t in (0, 1, 2)] == [0.5, 0.0, 0.0]
    # scores per row 2, 2, 0.5, 0.5, 0.5 -> mean 1.1
    assert rows["e1", 0]["episode_advantage"] == pytest.approx(0.9)
    assert rows["e2", 2]["episode_advantage"] == pytest.approx(-0.6)
    # returns with gamma 0.5: e1 = [1.5, 1]; e2 = [0.5, 0, 0]; "home" holds 1.5 and 0.5
    assert rows["e1", 0]["discounted_return"] == pytest.approx(1.5)
    assert rows["e1", 0]["step_advantage"] == pytest.approx(0.5)
    assert rows["e2", 0]["step_advantage"] == pytest.approx(-0.5)
    assert rows["e1", 0]["anchor_group_size"] == 2
    assert rows["e1", 0]["advantage"] == pytest.approx(1.4)
    assert rows["e2", 1]["step_advantage"] == 0.0 and rows["e2", 1]["anchor_group_size"] == 1


def test_worked_example_with_std_normalisation():
    episodes, steps = two_episode_group()
    rows = {
        (r["episode_id"], r["step"]): r
        for r in sql_rows(episodes, steps, gamma=0.5, mode="mean_std_norm")
    }
    std = math.sqrt((2 * 0.9**2 + 3 * 0.6**2) / 4)
    assert rows["e1", 0]["episode_advantage"] == pytest.approx(0.9 / (std + 1e-6))
    assert rows["e1", 0]["step_advantage"] == pytest.approx(0.5 / (math.sqrt(0.5) + 1e-6))


def test_grpo_has_no_step_term():
    episodes, steps = two_episode_group()
    for row in sql_rows(episodes, steps, algo="grpo"):
        assert row["step_advantage"] == 0.0
        assert row["advantage"] == row["episode_advantage"]


def test_invalid_action_penalty_hits_its_row_only():
    episodes = [episode("e1", "g", 1.0), episode("e2", "g", 1.0)]
    steps = [step("e1", 0, valid=False), step("e1", 1), step("e2", 0), step("e2", 1, valid=None)]
    rows = {(r["episode_id"], r["step"]): r for r in sql_rows(episodes, steps, gamma=1.0)}
    # scores 0.9, 1, 1, 1 -> mean 0.975
    assert rows["e1", 0]["episode_advantage"] == pytest.approx(-0.075)
    assert rows["e1", 1]["episode_advantage"] == pytest.approx(0.025)
    assert rows["e1", 0]["discounted_return"] == pytest.approx(0.9)


def test_single_episode_group():
    episodes = [episode("e", "g", 1.0)]
    steps = [step("e", 0, step_reward=1.0, anchor="x"), step("e", 1, anchor="y")]
    for row in sql_rows(episodes, steps):
        assert row["episode_advantage"] == 0.0  # both rows carry the same score
        assert row["step_advantage"] == 0.0  # every anchor group is a singleton


def test_group_with_one_row_uses_mean_0_std_1():
    episodes = [episode("e", "g", 0.8)]
    steps = [step("e", 0)]
    (row,) = sql_rows(episodes, steps)
    assert row["episode_advantage"] == pytest.approx(0.8)
    (row,) = sql_rows(episodes, steps, mode="mean_std_norm")
    assert row["episode_advantage"] == pytest.approx(0.8 / (1 + 1e-6))


def equal_reward_batch() -> tuple[list[dict], list[dict]]:
    episodes = [episode("a1", "same", 1.0), episode("a2", "same", 1.0)]
    episodes += [episode("b1", "mixed", 1.0), episode("b2", "mixed", 0.0)]
    steps = [step(e["episode_id"], t) for e in episodes for t in range(3)]
    return episodes, steps


@pytest.mark.parametrize("mode", ["mean_norm", "mean_std_norm"])
def test_all_equal_rewards_give_zero_episode_advantage(mode):
    episodes, steps = equal_reward_batch()
    rows = [r for r in sql_rows(episodes, steps, mode=mode) if r["episode_id"] in ("a1", "a2")]
    assert len(rows) == 6
    assert all(r["episode_advantage"] == pytest.approx(0.0, abs=1e-12) for r in rows)  # std 0


def test_dynamic_sampling_drops_groups_with_equal_rewards():
    episodes, steps = equal_reward_batch()
    result = compute_advantages(
        duckdb.connect(),
        AdvantageConfig(dynamic_sampling=True),
        episodes=pa.Table.from_pylist(episodes, schema=EPISODES_SCHEMA),
        steps=pa.Table.from_pylist(steps, schema=STEPS_SCHEMA),
    )
    assert set(result.table["episode_id"].to_pylist()) == {"b1", "b2"}  # group "mixed"
    summary = {row["group_id"]: row for row in result.group_summary.to_pylist()}
    assert summary["same"]["dropped"] and not summary["mixed"]["dropped"]
    assert summary["same"]["episodes"] == 2 and summary["same"]["steps"] == 6
    assert result.stats["groups"] == 1 and result.stats["groups_dropped"] == 1
    assert result.stats["steps"] == 6 and result.stats["steps_dropped"] == 6


def test_step_reward_normalisation_and_final_reward():
    episodes = [episode("judged", "g", 1.0), episode("no-eval", "g", None)]
    steps = [step("judged", t, step_reward=1.0) for t in range(5)]
    steps += [step("no-eval", 0, reward=0.2), step("no-eval", 1, step_reward=0.7, reward=0.3)]
    rows = {(r["episode_id"], r["step"]): r for r in sql_rows(episodes, steps, gamma=1.0)}
    assert [rows["judged", t]["reward"] for t in range(5)] == pytest.approx([0.25] * 4 + [1.0])
    assert rows["judged", 0]["discounted_return"] == pytest.approx(2.0)  # R in [0, 2]
    # without an eval score the last step keeps its own reward (judge first, then env)
    assert rows["no-eval", 1]["reward"] == 0.7
    raw = {
        (r["episode_id"], r["step"]): r
        for r in sql_rows(episodes, steps, gamma=1.0, normalize_step_rewards=False)
    }
    assert raw["judged", 0]["discounted_return"] == pytest.approx(5.0)


def test_unpaid_revisits_stop_a_loop_from_farming_the_judge():
    """open (1) -> back (0) -> open again (1, but back at a state already seen) -> fail."""
    episodes = [episode("loop", "g", 0.0), episode("direct", "g", 1.0)]
    steps = [
        step("loop", 0, step_reward=1.0, anchor="home"),
        step("loop", 1, step_reward=0.0, anchor="settings"),
        step("loop", 2, step_reward=1.0, anchor="home"),
        step("loop", 3, step_reward=1.0, anchor="settings"),
        step("direct", 0, step_reward=1.0, anchor="home"),
        step("direct", 1, step_reward=1.0, anchor="settings"),
        step("direct", 2, step_reward=1.0, anchor="network"),
    ]
    options = dict(gamma=1.0, normalize_step_rewards=False, invalid_penalty=0.0)
    paid = {(r["episode_id"], r["step"]): r["reward"] for r in sql_rows(episodes, steps, **options)}
    unpaid = {(r["episode_id"], r["step"]): r["reward"]
              for r in sql_rows(episodes, steps, revisit_rewards=False, **options)}
    assert paid[("loop", 2)] == 1.0  # the reference pays the loop's second "open"
    assert unpaid[("loop", 2)] == 0.0  # settings was seen at step 1
    assert unpaid[("loop", 0)] == 1.0 and unpaid[("loop", 3)] == 0.0  # the eval, unchanged
    assert [unpaid[("direct", t)] for t in range(3)] == [1.0, 1.0, 1.0]
    assert_same(sql_rows(episodes, steps, revisit_rewards=False, **options),
                reference_advantages(episodes, steps,
                                     REFERENCE_ADVANTAGES.replace(revisit_rewards=False, **options)))


def test_missing_steps_still_discount():
    episodes = [episode("e", "g", 1.0)]
    steps = [step("e", 0, step_reward=0.0), step("e", 3, step_reward=1.0)]
    rows = sql_rows(episodes, steps, gamma=0.5)
    assert rows[0]["discounted_return"] == pytest.approx(0.5**3)


@pytest.mark.parametrize("gamma", [0.0, 1.0])
def test_gamma_extremes(gamma):
    episodes, steps = two_episode_group()
    rows = {(r["episode_id"], r["step"]): r for r in sql_rows(episodes, steps, gamma=gamma)}
    assert rows["e1", 0]["discounted_return"] == pytest.approx(1.0 if gamma == 0 else 2.0)


def test_long_episode_beyond_exact_range_is_refused():
    episodes = [episode("e", "g", 1.0)]
    steps = [step("e", 0), step("e", 5000)]
    with pytest.raises(ValueError, match="gamma: an episode spans 5001 steps"):
        sql_rows(episodes, steps, gamma=0.5)


def test_table_names_where_filter_and_ungrouped_episodes():
    con = duckdb.connect()
    episodes, steps = two_episode_group()
    episodes = [{**e, "run_id": "r1"} for e in episodes]
    episodes += [{"episode_id": "x", "group_id": "h", "eval_score": 1.0, "run_id": "r2"}]
    episodes += [{"episode_id": "y", "group_id": None, "eval_score": 1.0, "run_id": "r1"}]
    steps += [step("x", 0), step("y", 0)]
    con.register("episodes_in", pa.Table.from_pylist(episodes))
    con.register("steps_in", pa.Table.from_pylist(steps, schema=STEPS_SCHEMA))
    con.execute("CREATE TABLE episodes AS SELECT * FROM episodes_in")
    con.execute("CREATE TABLE steps AS SELECT * FROM steps_in")
    result = compute_advantages(con, where="run_id = 'r1'")
    assert set(result.table["episode_id"].to_pylist()) == {"e1", "e2"}
    assert tuple(result.table.column_names) == OUTPUT_COLUMNS
    assert result.stats["episodes_without_group"] == 1
    sizes = result.anchor_group_sizes.to_pylist()
    assert sizes == [
        {"anchor_group_size": 1, "anchor_groups": 3, "steps": 3},
        {"anchor_group_size": 2, "anchor_groups": 1, "steps": 2},
    ]
    (group,) = result.group_summary.to_pylist()
    assert group["anchor_groups"] == 4 and group["singleton_steps"] == 3
    assert group["largest_anchor_group"] == 2
    assert result.stats["singleton_step_fraction"] == pytest.approx(0.6)


def test_missing_column_is_named():
    con = duckdb.connect()
    steps = pa.table({"episode_id": ["e"], "step": [0]})
    episodes = pa.Table.from_pylist([episode("e", "g", 1.0)], schema=EPISODES_SCHEMA)
    with pytest.raises(ValueError, match=r"steps: .* lacks column\(s\) \['reward', 'step_reward'"):
        compute_advantages(con, steps=steps, episodes=episodes)


def test_empty_selection():
    result = compute_advantages(
        duckdb.connect(),
        episodes=EPISODES_SCHEMA.empty_table(),
        steps=STEPS_SCHEMA.empty_table(),
    )
    assert result.table.num_rows == 0
    assert result.stats["steps"] == 0 and result.stats["singleton_step_fraction"] == 0.0


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"algo": "ppo"}, "algo: input should be 'gigpo' or 'grpo', not 'ppo'"),
        ({"mode": "std"}, "mode: input should be 'mean_norm' or 'mean_std_norm', not 'std'"),
        ({"gamma": 1.5}, "gamma: input should be less than or equal to 1, not 1.5"),
        ({"epsilon": 0.0}, "epsilon: input should be greater than 0, not 0.0"),
        ({"invalid_penalty": math.nan}, "invalid_penalty: input should be a finite number, not nan"),
        ({"invalid_penalty": -0.1}, "invalid_penalty: input should be greater than or equal to 0"),
        ({"gama": 0.9}, "gama: no such setting"),
    ],
)
def test_bad_configuration_is_named(params, message):
    with pytest.raises(InvalidInput) as caught:
        AdvantageConfig(**params)
    assert message in str(caught.value)


def test_the_algo_type_names_every_registered_estimator_and_each_is_documented():
    """`Algo` is the enum the CLI and the API show; `ESTIMATORS` is what computes: equal, and
    each estimator listed in the module docstring (the equations' page)."""
    assert list(typing.get_args(Algo)) == list(ESTIMATORS)
    for name, estimator in ESTIMATORS.items():
        assert estimator.summary.strip()
        assert re.search(rf"^- ``{name}``: ", advantages.__doc__, re.MULTILINE), name


# --- branches: a replayed prefix counts once ------------------------------------------------

BRANCH_EPISODES_SCHEMA = EPISODES_SCHEMA.append(pa.field("branch_step", pa.int32()))


@st.composite
def branched_batches(draw):
    """`batches`, some of whose episodes are branches at a step (their earlier rows replayed)."""
    episodes, steps = draw(batches())
    for e in episodes:
        e["branch_step"] = draw(st.none() | st.integers(0, 6))
    return episodes, steps


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=branched_batches(), params=configs)
def test_sql_matches_the_specification_with_branches(batch, params):
    episodes, steps = batch
    result = compute_advantages(
        CON, REFERENCE_ADVANTAGES.replace(**params),
        episodes=pa.Table.from_pylist(episodes, schema=BRANCH_EPISODES_SCHEMA),
        steps=pa.Table.from_pylist(steps, schema=STEPS_SCHEMA))
    got = sorted(result.table.to_pylist(), key=lambda row: (row["episode_id"], row["step"]))
    assert_same(got, reference_advantages(episodes, steps, AdvantageConfig(**params)))


def test_a_branchs_replayed_prefix_never_counts_twice_and_its_step_k_joins_the_parents_group():
    """p: home -> list -> fail (judge 1, 0); b branches p at step 1 (home replayed), then
    succeeds from list. Only b's steps 1.. are rows: the list state's anchor group is p's and
    b's step 1, and home's group is p's step 0 alone (not twice)."""
    episodes = [{"episode_id": "p", "group_id": "g", "eval_score": 0.0, "branch_step": None},
                {"episode_id": "b", "group_id": "g", "eval_score": 1.0, "branch_step": 1}]
    steps = [step("p", 0, step_reward=1.0, anchor="home"), step("p", 1, step_reward=0.0, anchor="list"),
             step("p", 2, step_reward=0.0, anchor="other"),
             step("b", 0, step_reward=1.0, anchor="home"), step("b", 1, step_reward=1.0, anchor="list"),
             step("b", 2, step_reward=1.0, anchor="done")]
    result = compute_advantages(CON, TUNED_ADVANTAGES,
                                episodes=pa.Table.from_pylist(episodes, schema=BRANCH_EPISODES_SCHEMA),
                                steps=pa.Table.from_pylist(steps, schema=STEPS_SCHEMA))
    rows = {(r["episode_id"], r["step"]): r for r in result.table.to_pylist()}
    assert sorted(rows) == [("b", 1), ("b", 2), ("p", 0), ("p", 1), ("p", 2)]
    assert rows[("p", 0)]["anchor_group_size"] == 1
    assert rows[("p", 1)]["anchor_group_size"] == rows[("b", 1)]["anchor_group_size"] == 2
    # the branch's return at K includes only what came after the replay; its R is the whole
    # trajectory's (the replayed step's reward counts in it once)
    assert rows[("b", 1)]["step_advantage"] > 0 > rows[("p", 1)]["step_advantage"]
    assert math.isclose(rows[("b", 2)]["reward"], 1.0)
    assert_same(sorted(rows.values(), key=lambda r: (r["episode_id"], r["step"])),
                reference_advantages(episodes, steps, TUNED_ADVANTAGES))
