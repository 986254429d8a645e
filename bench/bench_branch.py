"""Branching on the simulated phone: 100 branches from 50 parents at random steps K.

Parents are episodes of the demo policy (the oracle with mistakes) on 50 sampled tasks. Each
parent is branched twice at a random recorded step K (`elake branch`'s job, the random policy
acting after K). Reported: the share of branches that reached the parent's state at K (the
replay's every screen matched the parent's, and the branch's step K landed in the parent's
anchor group), and the replay's time per replayed step (reset + carrying the recorded actions
out + checking each screen, without recording), against the time per step of recording the
parents (render, policy, judge, record) as the baseline.
"""

from __future__ import annotations

import argparse
import random
import time

from common import line, workdir

from episodelake.collectors.envs.sim.device import SimDevice
from episodelake.collectors.jobs.branch import BranchSpec, branch_point, run_branches
from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts, task_ids
from episodelake.collectors.loop import replay
from episodelake.lake import Lake


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--parents", type=int, default=50)
    ap.add_argument("--n", type=int, default=2, help="branches per parent")
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with workdir("branch") as d:
        lake = Lake(d / "lake")
        spec = RolloutSpec(task_ids(args.parents, seed=args.seed), group_size=1, max_steps=15,
                           run_id="parents", seed=args.seed)
        started = time.perf_counter()
        parents = run_rollouts(lake, spec, demo_agent("demo"), progress=False, backend="thread")
        record_s = time.perf_counter() - started
        lake.invalidate()
        points = [branch_point(lake, str(p.episode_id), rng.randrange(p.steps)) for p in parents.episodes]

        replayed_steps, replay_s = 0, 0.0
        for point in points:
            for task in point.tasks(args.n, args.seed, 0):
                device = SimDevice(0)
                t = time.perf_counter()
                device.start_task(task)
                replay(device, task.branch)  # type: ignore[arg-type]  # every task here is a branch
                replay_s += time.perf_counter() - t
                replayed_steps += point.step

        reached = 0
        started = time.perf_counter()
        for point in points:
            report = run_branches(lake, BranchSpec(episode_ids=(point.episode_id,), at=str(point.step), n=args.n,
                                                   policy="random", max_steps=point.step + 3, seed=args.seed))
            lake.invalidate()
            parent_key = lake.steps(point.episode_id, columns=["step", "anchor_key"]).to_pylist()[point.step]
            for b in report["branches"]:
                key = lake.steps(b["episode_id"], columns=["step", "anchor_key"]).to_pylist()[point.step]
                reached += key["anchor_key"] == parent_key["anchor_key"]
        job_s = time.perf_counter() - started
        total = len(points) * args.n
        ks = [p.step for p in points]
        line("branch sim reach parent state", parents=len(points), branches=total,
             reached=f"{reached}/{total} ({100 * reached / total:.0f}%)", mean_K=sum(ks) / len(ks),
             max_K=max(ks))
        per_step = 1000 * replay_s / max(replayed_steps, 1)
        recorded = 1000 * record_s / parents.steps
        line("branch sim replay per step", replayed_steps=replayed_steps, replay_ms_step=per_step,
             record_ms_step=recorded, ratio=f"{per_step / recorded:.2f}x",
             job_s_per_branch=job_s / total)


if __name__ == "__main__":
    main()
