"""GiGPO advantages for 1,000,000 steps: the DuckDB SQL path vs the plain-Python specification.

Synthetic batch: groups of 8 episodes of 1-40 steps (mean ~20), a {0, 1} judge reward on most
steps, an eval score per episode, ~5% invalid actions, and anchor keys drawn from a few states
per group (so anchor groups of every size occur). Both sides get their input in their natural
form (DuckDB tables; lists of dicts) and the conversion is not timed. The Python side runs on
a subsample of whole groups when asked to (``--python-steps``) and is scaled linearly; the
output says so.

    python bench/bench_advantages.py [--steps 1000000] [--python-steps 200000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from episodelake.trainer.advantages import REFERENCE_ADVANTAGES, compute_advantages
from episodelake.trainer.reference_advantages import reference_advantages

GROUP_SIZE = 8
ANCHOR_STATES = 6


def synthetic_batch(total_steps: int, seed: int = 0) -> tuple[pa.Table, pa.Table]:
    """Episodes and steps tables with about `total_steps` steps (whole groups)."""
    rng = np.random.default_rng(seed)
    episodes_needed = total_steps // 10 + 2 * GROUP_SIZE
    lengths = rng.integers(1, 40, size=episodes_needed)
    ends = np.cumsum(lengths)
    count = int(np.searchsorted(ends, total_steps) + 1)
    count += -count % GROUP_SIZE
    lengths = lengths[:count]
    episode_ids = np.array([f"ep{i:07d}" for i in range(count)])
    group_of_episode = np.arange(count) // GROUP_SIZE
    episodes = pa.table(
        {
            "episode_id": episode_ids,
            "group_id": np.array([f"g{g:06d}" for g in group_of_episode]),
            "eval_score": rng.integers(0, 2, size=count).astype(float),
        }
    )
    step_episode = np.repeat(np.arange(count), lengths)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    position = np.arange(len(step_episode)) - starts
    judged = rng.random(len(step_episode)) < 0.9
    anchor_state = rng.integers(0, ANCHOR_STATES, size=len(step_episode))
    steps = pa.table(
        {
            "episode_id": episode_ids[step_episode],
            "step": position.astype(np.int32),
            "reward": np.zeros(len(step_episode)),
            "step_reward": pa.array(
                rng.integers(0, 2, size=len(step_episode)).astype(float), mask=~judged
            ),
            "anchor_key": pa.array(
                [
                    f"g{g}-s{s}"
                    for g, s in zip(group_of_episode[step_episode], anchor_state, strict=True)
                ]
            ),
            "action_valid": rng.random(len(step_episode)) > 0.05,
        }
    )
    return episodes, steps


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds, and CPU seconds of this process (all DuckDB threads included)."""

    wall: float
    cpu: float

    def scaled(self, factor: float) -> Timing:
        return Timing(self.wall * factor, self.cpu * factor)


def timed(run: Callable[[], object]) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu)


def time_sql(con: duckdb.DuckDBPyConnection, repeats: int = 3) -> Timing:
    """The best of `repeats` runs over the connection's ``episodes`` and ``steps`` tables."""
    runs = [timed(lambda: compute_advantages(con, REFERENCE_ADVANTAGES)) for _ in range(repeats)]
    return min(runs, key=lambda t: t.wall)


def time_python(episodes: pa.Table, steps: pa.Table) -> Timing:
    episode_rows = episodes.to_pylist()
    step_rows = steps.to_pylist()
    return timed(lambda: reference_advantages(episode_rows, step_rows, REFERENCE_ADVANTAGES))


def subsample(episodes: pa.Table, steps: pa.Table, target_steps: int) -> tuple[pa.Table, pa.Table]:
    """The first whole groups holding about `target_steps` steps."""
    if target_steps >= steps.num_rows:
        return episodes, steps
    last_episode = steps["episode_id"][target_steps].as_py()
    index = pc.index(episodes["episode_id"], last_episode).as_py()
    keep = episodes.slice(0, index + GROUP_SIZE - index % GROUP_SIZE)
    chosen = pc.is_in(steps["episode_id"], keep["episode_id"])
    return keep, steps.filter(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument(
        "--python-steps",
        type=int,
        default=None,
        help="time the Python specification on this many steps and scale (default: all)",
    )
    args = parser.parse_args()

    episodes, steps = synthetic_batch(args.steps)
    total = steps.num_rows
    con = duckdb.connect()
    con.register("episodes_arrow", episodes)
    con.register("steps_arrow", steps)
    con.execute("CREATE TABLE episodes AS SELECT * FROM episodes_arrow")
    con.execute("CREATE TABLE steps AS SELECT * FROM steps_arrow")
    threads = con.sql("SELECT current_setting('threads')").fetchall()[0][0]
    sql = time_sql(con)

    py_episodes, py_steps = subsample(episodes, steps, args.python_steps or total)
    measured = time_python(py_episodes, py_steps)
    python = measured.scaled(total / py_steps.num_rows)
    notes = [
        f"cpu: sql {sql.cpu:.2f} s, python {python.cpu:.1f} s, ratio {python.cpu / sql.cpu:.0f}x",
        f"duckdb threads {threads}, sql best of 3",
    ]
    if py_steps.num_rows < total:
        notes.append(
            f"python timed on {py_steps.num_rows:,} steps ({measured.wall:.2f} s), scaled linearly"
        )
    print(
        f"advantages  {total:,} steps  sql {sql.wall:.2f} s  python {python.wall:.1f} s  "
        f"ratio {python.wall / sql.wall:.0f}x  ({'; '.join(notes)})"
    )


if __name__ == "__main__":
    main()
