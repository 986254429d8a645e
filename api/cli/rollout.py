"""`elake rollout` and `elake demo`: episodes from the simulated phone, no phone or GPU needed."""

from __future__ import annotations

import time
import uuid

from episodelake.lake.errors import InvalidInput
from episodelake.lake.lake import Lake

#: The demo's two "checkpoints": an earlier, noisier policy and a later, better one, so the
#: stats pages have a success rate that moves across policy_version.
DEMO_POLICIES = (("ckpt-10", "demo"), ("ckpt-20", "light"))
NOISE_TO_CATEGORY = {"grounding": "grounding", "planning": "planning",
                     "premature_terminate": "planning", "loop": "other"}


def register(commands) -> None:
    p = commands.add("rollout", "run N tasks x G rollouts on a simulated phone and record them")
    p.add_argument("--env", choices=("sim",), default="sim", help="environment (default sim)")
    p.add_argument("--tasks", type=int, default=8, help="number of tasks sampled (default 8)")
    p.add_argument("--task", action="append", default=[], metavar="ID",
                   help="a task id instead of sampling, e.g. 'wifi_on' (repeatable)")
    p.add_argument("--group-size", type=int, default=8, help="rollouts per task, one group (default 8)")
    p.add_argument("--max-steps", type=int, default=15)
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--noise", choices=("none", "light", "demo"), default="demo",
                   help="demo policy mistakes: none (the oracle), light, demo (default)")
    p.add_argument("--run-id", help="default: a new id")
    p.add_argument("--policy-version", default="demo")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_rollout)

    p = commands.add("demo", "create a demo lake: simulated episodes, step rewards, a failure set, tags")
    p.add_argument("--tasks", type=int, default=40, help="tasks (default 40)")
    p.add_argument("--group-size", type=int, default=4, help="rollouts per task per checkpoint (default 4)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)


def cmd_rollout(args) -> None:
    from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts, task_ids

    ids = task_ids(args.task or args.tasks, seed=args.seed)
    spec = RolloutSpec(ids, group_size=args.group_size, max_steps=args.max_steps,
                       run_id=args.run_id or new_run_id("rollout"),
                       policy_version=args.policy_version, seed=args.seed)
    report = run_rollouts(Lake(args.lake), spec, demo_agent(args.noise), workers=args.workers)
    print(report.summary())


def new_run_id(kind: str) -> str:
    return f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def cmd_demo(args) -> None:
    from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts, task_ids

    lake = Lake(args.lake)
    if lake.dataset("episodes").count_rows():
        raise InvalidInput(f"{lake.path} already holds episodes; give a new --lake for the demo")
    ids = task_ids(args.tasks, seed=args.seed)
    started = time.perf_counter()
    total = 0
    for i, (version, noise) in enumerate(DEMO_POLICIES):
        spec = RolloutSpec(ids, group_size=args.group_size, run_id=f"demo-{version}", policy_version=version,
                           seed=args.seed + i, batch=f"b{i}")
        report = run_rollouts(lake, spec, demo_agent(noise), workers=args.workers)
        print(report.summary())
        total += len(report.episodes)
        lake.create_tag(f"demo-{version}")
    curated = curate_failures(lake)
    lake.optimize(prune_older_than=None)
    counts = lake.sql("select count(*) n, avg(success::int) rate from episodes").to_pylist()[0]
    print(f"demo lake {lake.path}: {counts['n']} episodes ({total} recorded now), success "
          f"{counts['rate']:.0%}, failure set 'demo failures' with {curated} episodes, tags "
          f"{', '.join(sorted(lake.tags()))}, in {time.perf_counter() - started:.0f} s")


def curate_failures(lake: Lake, limit: int = 24) -> int:
    """A failure set from the demo's failed episodes, categorised by the mistake behind them."""
    from episodelake.lake import curation

    rows = lake.sql(f"""
        select e.episode_id,
               min(s.step) filter (where s.step_reward = 0) as failing_step,
               first(json_extract_string(s.info, '$.noise') order by s.step)
                   filter (where json_extract_string(s.info, '$.noise') is not null) as noise
        from episodes e join steps s using (episode_id)
        where e.success = false
        group by e.episode_id, e.created_at
        order by e.created_at
        limit {int(limit)}
    """).to_pylist()
    failure_set = curation.create_set(lake, "demo failures", kind="failure",
                                      description="Failed demo episodes, categorised by the mistake behind them")
    for row in rows:
        curation.add_member(lake, failure_set["set_id"], row["episode_id"],
                            failure_category=NOISE_TO_CATEGORY.get(row["noise"], "other"),
                            failing_step=row["failing_step"],
                            note=f"demo policy mistake: {row['noise'] or 'none recorded'}",
                            added_by="elake demo")
    return len(rows)
