"""Learning on the simulated phone: GiGPO vs GRPO, same policy, same seeds, same episode budget.

Each algorithm trains its own policy from the same initial weights, on the same tasks (the
suite's training share), with the same rollout seeds and the same number of episodes. Two
suites: `--suite easy` (default; the easy templates, 2-4 steps, TinyPolicy) and `--suite
long` (the long templates, 8-20 steps with recurring screens and held-out values never
trained on; the screen-reading policy, 10 seeds by default, target 40% held-out). The two runs go side by side, one process and one CPU core each (the tiny policy
trains on one thread), so each curve is what one core does in the elapsed time; `--serial`
runs them one after the other instead. Before training and after every update, the policy
plays the held-out easy tasks (unseen parameter values of the same templates) on the same
phones; the success rate there is the learning curve. Both curves are printed side by side, then one summary line per
algorithm (with `credit_within_state`: how often the run's advantages ranked a judge-paid step above an unpaid one
taken in the same screen state, trainer/credit.py). Targets: held-out success from < 20% to > 60%; GiGPO >= GRPO at
equal episodes.

    python bench/bench_learning.py            # default budget: about 25 minutes on 2 cores
    python bench/bench_learning.py --quick    # a few minutes: fewer, smaller iterations
    python bench/bench_learning.py --keep DIR # keep the lakes (DIR/seed-S/gigpo, .../grpo) to browse, and
                                              # every curve in DIR/learning.json (with --seeds:
                                              # the bands plotted to DIR/learning.png)
    python bench/bench_learning.py --seeds 5  # seeds 0..4 per algorithm: means, 95% intervals and
                                              # the paired GiGPO - GRPO difference (2 runs at a time)
    python bench/bench_learning.py --seeds 5 --algos gigpo --set target_kl=0.05 --keep B
    python bench/bench_learning.py --summarise A B   # arms of both runs, paired by seed
    python bench/bench_learning.py --summarise A B --arm gigpo --arm 'gigpo target_kl=0.2'
    python bench/bench_learning.py --suite long --keep L          # seeds 0..9, screen policy,
                                              # 20 iterations: about 3.5 hours on 2 cores
    python bench/bench_learning.py --suite long --seed 3 --seeds 1 --keep L3  # one seed of it
    python bench/bench_learning.py --policy screen --seeds 5     # the easy suite, screen policy
    python bench/bench_learning.py --suite long --oracle-path    # train nothing: how likely the
                                              # fresh screen policy is to take each step of the
                                              # oracle's path, per template (where a start stalls)

With `--keep DIR` (and with `--summarise`), every run's iterations are also gathered into the
lake DIR/runs, one run id per arm and seed, so `elake --lake DIR/runs serve` shows the arms'
means and intervals on the Training page.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import multiprocessing as mp
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import learning_plot
from common import line, workdir

from episodelake.lake import Lake
from episodelake.trainer import learning_stats as stats
from episodelake.trainer import loop
from episodelake.trainer.config import ConfigError, TrainConfig

ALGOS = ("gigpo", "grpo")
#: Each suite's bar for held-out success (the issues' targets).
TARGETS = {"easy": 0.6, "long": 0.4}
#: Seeds per algorithm when --seeds is not given.
DEFAULT_SEEDS = {"easy": 1, "long": 10}
#: The policy each suite trains when --policy is not given.
DEFAULT_POLICY = {"easy": "tiny", "long": "screen"}
TARGET = TARGETS["easy"]
#: The --set changes of a kept run, beside its lakes.
ARMS = "arms.json"


def budget(quick: bool, iterations: int | None, seed: int, suite: str = "easy",
           policy: str | None = None) -> dict:
    """The `elake train` defaults with the benchmark's budget for a suite: the easy templates
    (2-4 steps, 6 steps allowed), or the long ones (8-20 steps, 24 allowed; 18 held-out tasks
    played twice after each update). The long suite's 20 iterations are what every measured
    long run used: about 17 CPU minutes a run, so its 10 seeds x 2 algorithms take about
    3.5 hours on 2 cores."""
    base = {"difficulty": suite, "seed": seed, "policy": policy or DEFAULT_POLICY[suite]}
    if suite == "long":
        base.update(max_steps=24)
        if quick:
            base.update(iterations=6, tasks=4, group_size=6, eval_repeats=1)
        else:
            base.update(iterations=20, tasks=8, group_size=8, eval_repeats=2)
    elif quick:
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


def oracle_path(suite: str, seed: int) -> None:
    """For every task of the suite, the fresh screen policy's probability of each action of the
    oracle's path (its verb times its element, span or app), walking the oracle's states with
    the oracle's responses as the history; per template, the mean log-probability of the whole
    path and the mean per step, and the steps of its first task. A step far below the others
    is where exploration stalls before any reward teaches it."""
    import math

    import torch
    from torch.nn import functional

    from episodelake.collectors.envs.sim import tasks as sim_tasks
    from episodelake.collectors.envs.sim.phone import Phone
    from episodelake.lake.vocab.families import format_tool_call
    from episodelake.trainer.policies import screen
    from episodelake.trainer.policies.screen_progress import action_note, screen_note
    from episodelake.trainer.policies.screen_read import element_at, read_screen
    from episodelake.trainer.policies.tiny import VERBS

    policy = screen.ScreenPolicy(screen.ScreenConfig(seed=seed))
    paths: dict[str, list[list[tuple[str, float]]]] = {}
    for task in sim_tasks.all_tasks():
        if task.difficulty != suite:
            continue
        phone = Phone(0)
        task.setup(phone)
        history: list[str] = []
        steps: list[tuple[str, float]] = []
        for _ in range(40):
            action = task.solution(phone)
            read = read_screen(phone.ui_tree())
            where = screen_note(read.signature)
            hit = element_at(read.elements, action["coordinate"]) if "coordinate" in action else -1
            where += action_note(action["action"], read.elements, hit)  # as the policy notes its acts
            response = format_tool_call(action, f"oracle{where}")
            encoded = screen.encode(policy.config, task.goal, read, history)
            encoded.verb, encoded.argument = policy.choice(response, encoded)
            with torch.no_grad():
                out = policy.module(screen.collate([encoded]))
            p = 0.0
            if encoded.verb >= 0:
                p = float(functional.softmax(out["verb"][0], 0)[encoded.verb])
                logits = policy._argument_logits(out, VERBS[encoded.verb])
                if logits is not None:
                    p *= float(functional.softmax(logits[0], 0)[encoded.argument]) if encoded.argument >= 0 else 0.0
            steps.append((VERBS[encoded.verb] if encoded.verb >= 0 else "?", p))
            if action["action"] == "terminate":
                break
            phone.step(action)
            history.append(response)
        paths.setdefault(task.name, []).append(steps)
    for name, runs in paths.items():
        logs = [sum(math.log(max(p, 1e-12)) for _, p in steps) for steps in runs]
        line(f"oracle path {name} ({len(runs)} tasks)", mean_log_p=round(sum(logs) / len(logs), 1),
             mean_step_p=round(sum(p for steps in runs for _, p in steps) / sum(map(len, runs)), 3),
             first_task=" ".join(f"{verb}:{p:.3f}" for verb, p in runs[0]))


def arm(algo: str, changes: dict) -> str:
    """The label of an algorithm run with `--set` changes, e.g. ``gigpo target_kl=0.05``."""
    return " ".join([algo, *(f"{k}={v}" for k, v in sorted(changes.items()))])


def parse_set(text: str) -> tuple[str, object]:
    key, _, value = text.partition("=")
    if not key or not value:
        raise argparse.ArgumentTypeError(f"--set takes KEY=VALUE (a TrainConfig field), got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def load(folders: list[Path], arms: list[str] | None = None) -> tuple[list[int], dict[str, list[dict]]]:
    """The runs of one or more `--keep` folders by arm (only `arms`, when given), cut to the
    seeds every arm has."""
    by_arm: dict[str, dict[int, dict]] = {}
    for folder in folders:
        for r in kept_runs(folder):
            by_arm.setdefault(r.get("arm", r["algo"]), {})[r["seed"]] = r
    if arms:
        if unknown := [a for a in arms if a not in by_arm]:
            raise SystemExit(f"--arm: {', '.join(map(repr, unknown))} not among the kept arms: "
                             f"{', '.join(map(repr, by_arm))}")
        by_arm = {label: by_arm[label] for label in arms}
    seeds = sorted(set.intersection(*(set(runs) for runs in by_arm.values()))) if by_arm else []
    if not seeds:
        raise SystemExit(f"no seed has finished in every arm of {', '.join(map(str, folders))}")
    return seeds, {label: [runs[s] for s in seeds] for label, runs in by_arm.items()}


def run_suite(run: dict) -> str | None:
    """The task suite a kept run trained on (None for runs kept before it was recorded)."""
    return run.get("suite") or run.get("settings", {}).get("difficulty")


def keep_curves(folder: Path, runs: list[dict]) -> None:
    """Add `runs` to DIR/learning.json, replacing earlier runs of the same arm and seed: a
    seed at a time into one DIR (`--seed S --seeds 1 --keep DIR`, each in DIR/seed-S) adds up
    instead of each run hiding the ones before."""
    path = folder / "learning.json"
    kept = json.loads(path.read_text())["runs"] if path.exists() else []
    ran = {(r["arm"], r["seed"]) for r in runs}
    kept = [r for r in kept if (r.get("arm", r["algo"]), r["seed"]) not in ran] + runs
    path.write_text(json.dumps({"seeds": sorted({r["seed"] for r in kept}), "runs": kept}))


def kept_runs(folder: Path) -> list[dict]:
    """DIR/learning.json's runs; while the benchmark is still going (or was stopped), the runs
    that finished, read from their lakes' `runs` tables."""
    if (folder / "learning.json").exists():
        return json.loads((folder / "learning.json").read_text())["runs"]
    found = []
    changes = json.loads((folder / ARMS).read_text()) if (folder / ARMS).exists() else {}
    for path in sorted(folder.glob("seed-*/*")):
        rows = Lake(path).sql(f"SELECT config, metrics FROM runs WHERE run_id = 'bench-{path.name}' "
                              "ORDER BY iteration").to_pylist()
        config = json.loads(rows[-1]["config"]) if rows else None
        if config is None or len(rows) < config["iterations"]:
            continue
        metrics = [json.loads(row["metrics"]) for row in rows]
        found.append({"algo": path.name, "arm": arm(path.name, changes), "seed": config["seed"],
                      "suite": config.get("difficulty"), "metrics": metrics,
                      "seconds": sum(sum(m["seconds"].values()) for m in metrics)})
    return found


def gather(folders: list[Path], into: Path) -> int:
    """Copy the `runs` rows of every run kept in `folders` into the lake `into`, renamed
    `bench-<arm>-seed<N>` (spaces as '_'), so one lake holds them all; returns how many runs."""
    changes: dict[Path, dict] = {f: json.loads((f / ARMS).read_text()) if (f / ARMS).exists() else {}
                                 for f in folders}
    rows = []
    for folder in folders:
        for path in sorted([*folder.glob("seed-*/*"), *folder.glob("gigpo"), *folder.glob("grpo")]):
            if path.name not in ALGOS or not (path / "runs.lance").exists():
                continue
            for row in Lake(path).sql(f"SELECT * FROM runs WHERE run_id = 'bench-{path.name}'").to_pylist():
                seed = json.loads(row["config"])["seed"]
                label = arm(path.name, changes[folder]).replace(" ", "_")
                rows.append({**row, "run_id": f"bench-{label}-seed{seed}"})
    if rows:
        Lake(into).upsert("runs", rows)
    return len({r["run_id"] for r in rows})


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:5.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=tuple(TARGETS),
                        help="easy templates (default) or the long ones (8-20 steps, 10 seeds by default); "
                             "with --summarise, the kept runs' own suite unless given")
    parser.add_argument("--policy", choices=("tiny", "screen"),
                        help="the policy both algorithms train (default: tiny for easy, screen for long)")
    parser.add_argument("--quick", action="store_true", help="a few minutes instead of ~30")
    parser.add_argument("--iterations", type=int, help="override the budget's iterations")
    parser.add_argument("--seed", type=int, default=0, help="the (first) seed")
    parser.add_argument("--seeds", type=int, metavar="N",
                        help="run seeds SEED..SEED+N-1 per algorithm and summarise them (default 1; "
                             "10 for --suite long)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="write the lakes to DIR/<algo> and keep them (default: a temp dir)")
    parser.add_argument("--serial", action="store_true",
                        help="run the algorithms one after the other (default: side by side)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each iteration")
    parser.add_argument("--algos", default=",".join(ALGOS), help="which algorithms (default: both)")
    parser.add_argument("--set", type=parse_set, action="append", default=[], metavar="KEY=VALUE",
                        help="a TrainConfig setting for every run, e.g. --set target_kl=0.05 "
                             "(repeatable; the arm is labelled with it)")
    parser.add_argument("--summarise", type=Path, nargs="+", metavar="DIR",
                        help="train nothing: summarise the runs kept in DIR (several DIRs: every arm "
                             "in them, paired by seed) and plot to the first DIR; runs still "
                             "going are left out")
    parser.add_argument("--arm", action="append", metavar="LABEL",
                        help="with --summarise: only this arm, e.g. --arm 'gigpo target_kl=0.2' "
                             "(repeatable; the seeds are those every chosen arm has)")
    parser.add_argument("--oracle-path", action="store_true",
                        help="train nothing: the fresh screen policy's probability of each step of "
                             "the oracle's path on the suite's tasks (seed --seed)")
    args = parser.parse_args()
    suite_given, args.suite = args.suite is not None, args.suite or "easy"
    if args.oracle_path:
        oracle_path(args.suite, args.seed)
        return
    global TARGET
    TARGET = TARGETS[args.suite]
    if args.summarise:
        seeds, runs = load(args.summarise, args.arm)
        suites = {run_suite(r) for rs in runs.values() for r in rs} - {None}
        if not suite_given and len(suites) == 1:  # the target of the suite the runs trained on
            TARGET = TARGETS[suites.pop()]
        summarise(seeds, runs, plot=args.summarise[0] / "learning.png")
        report_gathered(args.summarise, args.summarise[0] / "runs")
        return
    if args.seeds is None:
        args.seeds = DEFAULT_SEEDS[args.suite]
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    seeds = list(range(args.seed, args.seed + args.seeds))
    changes = dict(args.set)
    try:  # a wrong --set stops here, not in every worker after the pool has started
        TrainConfig(**{**budget(args.quick, args.iterations, args.seed, args.suite, args.policy), **changes})
    except ConfigError as exc:
        parser.error(f"--set: {exc}")
    algos = args.algos.split(",")
    if unknown := set(algos) - set(ALGOS):
        parser.error(f"--algos: {', '.join(sorted(unknown))} not among {', '.join(ALGOS)}")
    with nullcontext(args.keep) if args.keep else workdir("learning") as folder:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ARMS).write_text(json.dumps(changes))  # names the arms while runs are going
        jobs = [(algo, {**budget(args.quick, args.iterations, seed, args.suite, args.policy), **changes},
                 folder / f"seed-{seed}" if len(seeds) > 1 or args.keep else folder, args.verbose)
                for seed in seeds for algo in algos]
        if args.serial:
            outcomes = [run(*job) for job in jobs]
        else:
            with mp.get_context("spawn").Pool(len(algos)) as pool:  # Lance is not fork-safe
                outcomes = pool.starmap(run, jobs, chunksize=1)
    if args.keep:
        keep_curves(args.keep, [{"algo": job[0], "arm": arm(job[0], changes), "seed": job[1]["seed"],
                                 "settings": job[1], **outcome}
                                for job, outcome in zip(jobs, outcomes, strict=True)])
    if args.keep:
        report_gathered([args.keep], args.keep / "runs")
    if len(seeds) > 1 or len(algos) != len(ALGOS):
        summarise(seeds, {arm(algo, changes): outcomes[i::len(algos)] for i, algo in enumerate(algos)},
                  plot=args.keep / "learning.png" if args.keep else None)
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
             **{f"first_above_{round(100 * TARGET)}": reached})


def report_gathered(folders: list[Path], into: Path) -> None:
    count = gather(folders, into)
    print(f"{count} runs gathered into {into}: elake --lake {into} serve (the Training page)")


def cpu_minutes(run: dict, iteration: int | None) -> str:
    """CPU minutes of the training process up to and including `iteration` ("never": None)."""
    if iteration is None:
        return "never"
    return f"{sum(m['cpu_seconds'] for m in run['metrics'][:iteration + 1]) / 60:.1f}"


def credit(runs: list[dict]) -> str:
    """The arm's credit within a screen state (trainer/credit.py), each run's mean over its
    iterations, over seeds; runs recorded before the trainer scored credit have none."""
    means = []
    for run in runs:
        scores = [m["credit"]["within_state"] for m in run["metrics"]
                  if (m.get("credit") or {}).get("within_state") is not None]
        if scores:
            means.append(sum(scores) / len(scores))
    return str(stats.mean_interval(means)) if means else "not recorded"


def paired(measure: Callable[[list[float]], float], a: list[list[float]], b: list[list[float]]) -> str:
    """`measure` of each seed's curve in arm a minus the same seed's in arm b, with its interval."""
    return str(stats.paired_difference([measure(c) for c in a], [measure(c) for c in b]))


def summarise(seeds: list[int], runs: dict[str, list[dict]], *, plot: Path | None = None) -> None:
    """Per arm over seeds: final (last 5) success, area under the curve, iterations and CPU
    minutes to the target, the largest fall from a run's best; then each pair of arms' paired
    difference by seed, and the bands plotted to `plot`."""
    curves = {label: [[m["eval_success_rate"] for m in r["metrics"]] for r in rs] for label, rs in runs.items()}
    print(f"\nheld-out success per iteration over seeds {seeds[0]}..{seeds[-1]} (mean [95% interval])")
    bands = {label: stats.per_iteration(c) for label, c in curves.items()}
    def point(band: stats.Interval) -> str:  # one seed has no interval: say so, not [0%, 0%]
        if band.low is None or band.high is None:
            return f"{band.mean:6.1%} (one seed)      "
        return f"{band.mean:6.1%} [{band.low:6.1%}, {band.high:6.1%}]"

    for i in range(min(len(b) for b in bands.values())):
        print(f"{i + 1:>4}  " + "  ".join(f"{label} {point(b[i])}" for label, b in bands.items()))
    # the training reward (paid progress steps + the result): what a task set no run solves
    # yet still shows of learning
    rewards = {label: [[m["mean_episode_reward"] for m in r["metrics"]] for r in rs] for label, rs in runs.items()}
    for label, cs in curves.items():
        reached = [stats.first_above(c, TARGET) for c in cs]
        above = round(100 * TARGET)
        line(f"learning {label} ({len(cs)} seeds)", final_last5=str(stats.mean_interval([stats.final(c) for c in cs])),
             auc=str(stats.mean_interval([stats.area(c) for c in cs])),
             final_min=min(stats.final(c) for c in cs),
             **{f"first_above_{above}": "/".join("never" if r is None else str(r) for r in reached),
                f"cpu_minutes_to_{above}": "/".join(cpu_minutes(r, i) for r, i in zip(runs[label], reached, strict=True))},
             cpu_minutes_per_run=str(stats.mean_interval([
                 sum(m["cpu_seconds"] for m in r["metrics"]) / 60 for r in runs[label]])),
             largest_fall=max(stats.largest_fall(c) for c in cs),
             largest_fall_of_5_iteration_mean=max(stats.largest_fall(stats.moving_mean(c)) for c in cs),
             train_reward_last5=str(stats.mean_interval([stats.final(c) for c in rewards[label]])),
             train_reward_auc=str(stats.mean_interval([stats.area(c) for c in rewards[label]])),
             credit_within_state=credit(runs[label]),
             minutes=max(r["seconds"] for r in runs[label]) / 60)
    for a, b in itertools.combinations(curves, 2):
        line(f"learning {a} - {b} (paired)", final_last5=paired(stats.final, curves[a], curves[b]),
             auc=paired(stats.area, curves[a], curves[b]),
             train_reward_last5=paired(stats.final, rewards[a], rewards[b]),
             train_reward_auc=paired(stats.area, rewards[a], rewards[b]))
    if plot is not None:
        learning_plot.plot(curves, plot, title=f"held-out success, mean and 95% interval over seeds "
                                               f"{seeds[0]}..{seeds[-1]}", target=TARGET)
        reward_plot = plot.with_name("learning-reward.png")
        top = max(v for cs in rewards.values() for c in cs for v in c)
        learning_plot.plot(rewards, reward_plot, title="training reward (paid progress steps + result), mean "
                           f"and 95% interval over seeds {seeds[0]}..{seeds[-1]}", target=None,
                           top_value=max(1.0, float(top)), percent=False)
        print(f"plots: {plot}, {reward_plot}")


if __name__ == "__main__":
    main()
