"""Rollout throughput: steps/s recorded from simulated phones with W worker processes vs 1.

Each worker runs whole episode groups (render, policy, judge, record with full image checks)
into the same lake. The 1-worker run is the baseline; the ratio shows how collection scales
with processes on this machine's cores.
"""

from __future__ import annotations

import argparse
import os

from common import line, workdir

from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts, task_ids
from episodelake.lake import Lake


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", type=int, default=24)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--workers", type=int, nargs="+", default=[2])
    args = ap.parse_args()
    ids = task_ids(args.tasks, seed=5)
    rates = {}
    with workdir("rollout") as d:
        for w in [1, *args.workers]:
            spec = RolloutSpec(ids, group_size=args.group_size, run_id=f"bench-w{w}", seed=5)
            report = run_rollouts(Lake(d / f"lake-w{w}"), spec, demo_agent("demo"),
                                  workers=w, progress=False)
            rates[w] = report.steps / report.seconds
            line(f"rollout sim workers={w}", episodes=len(report.episodes), steps=report.steps,
                 steps_s=rates[w], vs_1_worker=f"{rates[w] / rates[1]:.2f}x", cores=os.cpu_count())


if __name__ == "__main__":
    main()
