"""Why a learning run fell: the training lakes of `bench_learning.py --keep DIR`, read with SQL.

For every run (seed x algorithm) one line per iteration: training and held-out success, the
held-out success per task (which task was lost when the curve fell), the update's entropy,
clip fraction and approximate KL to the rollout policy, the anchor groups' singleton share,
and the advantage scale (mean |A|, and of the episode and step terms), recomputed from the
lake with the run's own settings. Then one line per run naming its largest fall, and one
scoring GiGPO's and GRPO's credit on the run's rollouts against the judge's step marks
(trainer/credit.py: does a paid step get a larger advantage than an unpaid one?).

    python bench/learning_report.py DIR               # every run
    python bench/learning_report.py DIR --seed 3      # one seed
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import duckdb
import pyarrow as pa

from episodelake.lake import Lake
from episodelake.trainer import credit as credit_score
from episodelake.trainer import learning_stats as stats
from episodelake.trainer.advantages import (
    EPISODE_COLUMNS,
    STEP_COLUMNS,
    AdvantageConfig,
    compute_advantages,
)


def held_out_by_task(lake: Lake, run_id: str) -> dict[int, dict[str, float]]:
    """{iteration: {task: success}} of the run's evaluations (policy_version = iteration + 1)."""
    rows = lake.sql(f"""
        SELECT CAST(policy_version AS INTEGER) - 1 AS iteration, task_name, avg(success::INT) AS rate
        FROM episodes WHERE run_id = '{run_id}.eval' AND policy_version <> '0'
        GROUP BY ALL""").to_pylist()
    out: dict[int, dict[str, float]] = {}
    for row in rows:
        out.setdefault(row["iteration"], {})[row["task_name"]] = row["rate"]
    return out


def training_rows(lake: Lake, run_id: str) -> tuple[pa.Table, pa.Table]:
    """The run's training episodes (with the batch each was trained in: policy_version) and
    their steps, in the columns the advantage equations read."""
    episodes = lake.sql(f"SELECT {', '.join(EPISODE_COLUMNS)}, policy_version FROM episodes "
                        f"WHERE run_id = '{run_id}'")
    steps = lake.sql(f"SELECT {', '.join('s.' + c for c in STEP_COLUMNS)} FROM steps s "
                     f"JOIN episodes e USING (episode_id) WHERE e.run_id = '{run_id}'")
    return episodes, steps


def advantage_scale(lake: Lake, run_id: str, config: AdvantageConfig) -> dict[int, dict[str, float]]:
    """{iteration: mean |A|, |A^E|, |A^S|} over the iteration's training steps."""
    episodes, steps = training_rows(lake, run_id)
    con = duckdb.connect()
    result = compute_advantages(con, config, steps=steps, episodes=episodes)
    con.register("adv", result.table)
    con.register("e", episodes)
    rows = con.sql("""
        SELECT CAST(e.policy_version AS INTEGER) AS iteration, avg(abs(advantage)) AS a,
               avg(abs(episode_advantage)) AS a_e, avg(abs(step_advantage)) AS a_s
        FROM adv JOIN e USING (episode_id) GROUP BY ALL""").to_arrow_table().to_pylist()
    return {row["iteration"]: row for row in rows}


def credit(lake: Lake, run_id: str) -> dict[str, credit_score.Credit]:
    """GiGPO's and GRPO's credit scored on this run's own training batches (the same
    rollouts for both: trainer/credit.py)."""
    episodes, steps = training_rows(lake, run_id)
    return {algo: credit_score.score(episodes, steps, AdvantageConfig(algo=algo)) for algo in ("gigpo", "grpo")}


def metrics(lake: Lake, run_id: str) -> list[dict]:
    """The run's per-iteration metrics as the trainer stored them (runs table), in order."""
    rows = lake.sql(f"SELECT iteration, metrics FROM runs WHERE run_id = '{run_id}' ORDER BY iteration")
    return [json.loads(m) for m in rows["metrics"].to_pylist()]


def report(folder: Path, algo: str, seed: int) -> None:
    lake = Lake(folder / f"seed-{seed}" / algo)
    run_id = f"bench-{algo}"
    run = {"metrics": metrics(lake, run_id)}
    config = AdvantageConfig(algo=algo)
    by_task = held_out_by_task(lake, run_id)
    scale = advantage_scale(lake, run_id, config)
    tasks = sorted({task for rates in by_task.values() for task in rates})
    curve = [m["eval_success_rate"] for m in run["metrics"]]
    print(f"\n# {algo} seed {seed}: held-out tasks " + ", ".join(f"{chr(97 + k)}={t}" for k, t in enumerate(tasks)))
    print(" it  train  held   " + " ".join(f"{chr(97 + k):>4}" for k in range(len(tasks)))
          + "  entropy  clip   kl      single  |A|    |A^E|  |A^S|")
    for i, m in enumerate(run["metrics"]):
        u, s = m["update"], scale.get(i, {})
        cells = " ".join(f"{100 * by_task.get(i, {}).get(t, float('nan')):4.0f}" for t in tasks)
        print(f"{i:3d}  {100 * m['success_rate']:5.1f}  {100 * curve[i]:5.1f}  {cells}  "
              f"{u.get('entropy', float('nan')):7.3f}  {u.get('clip_fraction', float('nan')):.3f}  "
              f"{u.get('kl_old', u.get('approx_kl_old', float('nan'))):+.4f}  "
              f"{m['advantages'].get('singleton_step_fraction', float('nan')):.2f}    "
              f"{s.get('a', float('nan')):.3f}  {s.get('a_e', float('nan')):.3f}  {s.get('a_s', float('nan')):.3f}")
    best = max(range(len(curve)), key=curve.__getitem__)
    print(f"largest fall {100 * stats.largest_fall(curve):.1f} points; best {100 * curve[best]:.1f}% at "
          f"iteration {best}; last 5 {100 * stats.final(curve):.1f}%")
    scored = credit(lake, run_id)
    print("credit on these rollouts (a paid step's advantage above an unpaid one's, 0.5 = none): "
          + "; ".join(f"{algo} {c.overall:.3f} over all steps, {c.within_state:.3f} within a screen state "
                      f"({c.state_pairs:,} pairs)" for algo, c in scored.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="DIR of bench_learning.py --keep DIR")
    parser.add_argument("--seed", type=int, help="only this seed")
    args = parser.parse_args()
    for lake in sorted(args.folder.glob("seed-*/*")):  # runs still going report what they have
        seed = int(lake.parent.name.removeprefix("seed-"))
        if args.seed is None or seed == args.seed:
            report(args.folder, lake.name, seed)


if __name__ == "__main__":
    main()
