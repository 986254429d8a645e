"""Learning on the simulated phone: GiGPO vs GRPO, TinyPolicy, same seeds, same episode budget.

Each algorithm trains its own TinyPolicy from the same initial weights, on the same tasks
(the easy templates' training share), with the same rollout seeds and the same number of
episodes. The two runs go side by side, one process and one CPU core each (the tiny policy
trains on one thread), so each curve is what one core does in the elapsed time; `--serial`
runs them one after the other instead. Before training and after every update, the policy
plays the held-out easy tasks (unseen parameter values of the same templates) on the same
phones; the success rate there is the learning curve. Both curves are printed side by side, then one summary line per
algorithm. Targets: held-out success from < 20% to > 60%; GiGPO >= GRPO at equal episodes.

    python bench/bench_learning.py            # default budget: about 25 minutes on 2 cores
    python bench/bench_learning.py --quick    # a few minutes: fewer, smaller iterations
    python bench/bench_learning.py --keep DIR # keep the lakes (DIR/gigpo, DIR/grpo) to browse, and
                                              # every curve in DIR/learning.json (with --seeds:
                                              # the bands plotted to DIR/learning.png)
    python bench/bench_learning.py --seeds 5  # seeds 0..4 per algorithm: means, 95% intervals and
                                              # the paired GiGPO - GRPO difference (2 runs at a time)
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import time
from contextlib import nullcontext
from pathlib import Path

import learning_plot
from common import line, workdir

from episodelake.lake import Lake
from episodelake.trainer import learning_stats as stats
from episodelake.trainer import loop
from episodelake.trainer.config import TrainConfig

ALGOS = ("gigpo", "grpo")
#: The issue's bar for held-out success on the easy templates.
TARGET = 0.6


def budget(quick: bool, iterations: int | None, seed: int) -> dict:
    """The `elake train` defaults (tiny policy, easy templates) with the benchmark's budget."""
    base = {"difficulty": "easy", "seed": seed}
    if quick:
        base.update(iterations=8, tasks=4, group_size=6, eval_repeats=2)
    else:
        base.update(iterations=50, tasks=8, group_size=8, eval_repeats=8)
    if iterations is not None:
        base["iterations"] = iterations
    return base


def initial_success(lake: Lake, config: TrainConfig) -> float:
    """Held-out success of the untrained policy (the curve's starting point)."""
    policy = loop.build_policy(config)
    _, held_out = loop.split_tasks(config)
    report = loop.evaluate(lake, policy, held_out, config, run_id="initial", version="0",
                           iteration=-1, progress=False)
    assert report is not None
    return report.success_rate


def run(algo: str, settings: dict, folder: Path, verbose: bool = False) -> dict:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format=f"%(levelname)s {algo}: %(message)s", force=True)  # --serial
    config = TrainConfig(advantages={"algo": algo}, run_id=f"bench-{algo}", **settings)
    lake = Lake(folder / algo)
    started = time.perf_counter()
    start = initial_success(lake, config)
    result = loop.train(config, lake, progress=False)
    return {"start": start, "metrics": result.metrics, "seconds": time.perf_counter() - started,
            "episodes_per_iteration": config.tasks * config.group_size}


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:5.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few minutes instead of ~30")
    parser.add_argument("--iterations", type=int, help="override the budget's iterations")
    parser.add_argument("--seed", type=int, default=0, help="the (first) seed")
    parser.add_argument("--seeds", type=int, default=1, metavar="N",
                        help="run seeds SEED..SEED+N-1 per algorithm and summarise them (default 1)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="write the lakes to DIR/<algo> and keep them (default: a temp dir)")
    parser.add_argument("--serial", action="store_true",
                        help="run the algorithms one after the other (default: side by side)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each iteration")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    seeds = list(range(args.seed, args.seed + args.seeds))
    with nullcontext(args.keep) if args.keep else workdir("learning") as folder:
        jobs = [(algo, budget(args.quick, args.iterations, seed),
                 folder if len(seeds) == 1 else folder / f"seed-{seed}", args.verbose)
                for seed in seeds for algo in ALGOS]
        if args.serial:
            outcomes = [run(*job) for job in jobs]
        else:
            with mp.get_context("spawn").Pool(len(ALGOS)) as pool:  # Lance is not fork-safe
                outcomes = pool.starmap(run, jobs, chunksize=1)
    if args.keep:
        (args.keep / "learning.json").write_text(json.dumps(
            {"seeds": seeds, "runs": [{"algo": job[0], "seed": job[1]["seed"], **outcome}
                                      for job, outcome in zip(jobs, outcomes, strict=True)]}))
    if len(seeds) > 1:
        runs = {algo: outcomes[i::len(ALGOS)] for i, algo in enumerate(ALGOS)}
        summarise(seeds, runs)
        if args.keep:
            learning_plot.plot({algo: [[m["eval_success_rate"] for m in r["metrics"]] for r in rs]
                                for algo, rs in runs.items()}, args.keep / "learning.png",
                               title=f"held-out success, mean and 95% interval over seeds "
                                     f"{seeds[0]}..{seeds[-1]}", target=TARGET)
            print(f"plot: {args.keep / 'learning.png'}")
        return
    settings = jobs[0][1]
    results = dict(zip(ALGOS, outcomes, strict=True))
    for algo, r in results.items():
        print(f"# {algo}: {len(r['metrics'])} iterations in {r['seconds']:.0f} s", flush=True)

    per_iteration = results[ALGOS[0]]["episodes_per_iteration"]
    print(f"\n{'episodes':>8}  " + "  ".join(f"{a + ' train':>12}  {a + ' held-out':>15}"
                                             for a in ALGOS))
    print(f"{0:>8}  " + "  ".join(f"{'-':>12}  {percent(results[a]['start']):>15}" for a in ALGOS))
    for i in range(settings["iterations"]):
        cells = []
        for algo in ALGOS:
            m = results[algo]["metrics"][i]
            cells.append(f"{percent(m['success_rate']):>12}  {percent(m['eval_success_rate']):>15}")
        print(f"{(i + 1) * per_iteration:>8}  " + "  ".join(cells))
    print()
    for algo in ALGOS:
        r = results[algo]
        curve = [m["eval_success_rate"] for m in r["metrics"]]
        tail = curve[-5:]
        elapsed = 0.0
        reached = "never"
        for i, m in enumerate(r["metrics"]):
            elapsed += sum(m["seconds"].values())
            if m["eval_success_rate"] > TARGET:
                reached = f"iteration {i} ({(i + 1) * r['episodes_per_iteration']} episodes, " \
                          f"{elapsed / 60:.1f} min)"
                break
        line(f"learning {algo}", start=percent(r["start"]).strip(),
             final_last5=percent(sum(tail) / len(tail)).strip(), best=percent(max(curve)).strip(),
             mean_curve=percent(sum(curve) / len(curve)).strip(),
             episodes=len(curve) * r["episodes_per_iteration"], minutes=r["seconds"] / 60,
             first_above_60=reached)


def cpu_minutes(run: dict, iteration: int | None) -> str:
    """CPU minutes of the training process up to and including `iteration` ("never": None)."""
    if iteration is None:
        return "never"
    return f"{sum(m['cpu_seconds'] for m in run['metrics'][:iteration + 1]) / 60:.1f}"


def summarise(seeds: list[int], runs: dict[str, list[dict]]) -> None:
    """Per algorithm over seeds: final (last 5) success, area under the curve, iterations to
    the target, the largest fall from a run's best; then GiGPO - GRPO paired by seed."""
    curves = {algo: [[m["eval_success_rate"] for m in r["metrics"]] for r in rs] for algo, rs in runs.items()}
    print(f"\nheld-out success per iteration over seeds {seeds[0]}..{seeds[-1]} (mean [95% interval])")
    bands = {algo: stats.per_iteration(c) for algo, c in curves.items()}
    for i in range(min(len(b) for b in bands.values())):
        print(f"{i + 1:>4}  " + "  ".join(f"{algo} {b[i].mean:6.1%} [{b[i].low or 0:6.1%}, {b[i].high or 0:6.1%}]"
                                          for algo, b in bands.items()))
    for algo, cs in curves.items():
        reached = [stats.first_above(c, TARGET) for c in cs]
        line(f"learning {algo} ({len(cs)} seeds)", final_last5=str(stats.mean_interval([stats.final(c) for c in cs])),
             auc=str(stats.mean_interval([stats.area(c) for c in cs])),
             first_above_60="/".join("never" if r is None else str(r) for r in reached),
             cpu_minutes_to_60="/".join(cpu_minutes(r, i) for r, i in zip(runs[algo], reached, strict=True)),
             largest_fall=max(stats.largest_fall(c) for c in cs),
             minutes=max(r["seconds"] for r in runs[algo]) / 60)
    a, b = ALGOS
    line(f"learning {a} - {b} (paired)",
         final_last5=str(stats.paired_difference([stats.final(c) for c in curves[a]],
                                                 [stats.final(c) for c in curves[b]])),
         auc=str(stats.paired_difference([stats.area(c) for c in curves[a]],
                                         [stats.area(c) for c in curves[b]])))


if __name__ == "__main__":
    main()
