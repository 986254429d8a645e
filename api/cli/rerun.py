"""`elake rerun`: re-run a set's tasks with a new policy and report what changed."""

from __future__ import annotations

import argparse
import json

from episodelake.collectors.jobs.rerun import ENVS

_EPILOG = """examples:
  elake rerun --set login-failures --policy oracle --env sim --n 3
  elake rerun --set regressions --policy model --model-url http://127.0.0.1:8000/v1 --model ckpt-40 --n 5
  elake rerun --set regressions --policy model --env mobileworld --server http://10.0.0.5:8000 ...
  elake rerun --list
  elake rerun --show rerun-0123456789ab --json"""


def register(commands) -> None:
    p = commands.add("rerun", "re-run every task of a set with a new policy: per task before/after, "
                     "fixed/broke, overall delta with a confidence interval",
                     epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", help="the set's name or id")
    p.add_argument("--policy", help="oracle | noisy[:P] | random (demo policies, env sim) | model")
    p.add_argument("--env", choices=ENVS, default="sim", help="where to run (default sim)")
    p.add_argument("--n", type=int, default=3, help="episodes per task (default 3)")
    p.add_argument("--max-steps", type=int, default=20, help="step limit per episode (default 20)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sim phone and demo policies")
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    p.add_argument("--model-url", help="OpenAI-compatible server for --policy model")
    p.add_argument("--model", help="model name on that server")
    p.add_argument("--server", action="append", default=[], help="environment server URL (env mobileworld)")
    p.add_argument("--serial", help="adb device serial (env adb; default: the only one attached)")
    p.add_argument("--list", action="store_true", help="list earlier re-runs")
    p.add_argument("--show", metavar="RERUN_ID", help="print an earlier re-run's report")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_rerun)


def cmd_rerun(args) -> int:
    from tqdm import tqdm

    from episodelake.collectors.jobs.rerun import (
        RerunSpec,
        get_rerun,
        list_reruns,
        render,
        run_rerun,
    )
    from episodelake.lake.errors import InvalidInput
    from episodelake.lake.lake import Lake

    lake = Lake(args.lake, create=False)
    if args.list:
        reruns = list_reruns(lake)
        if args.json:
            print(json.dumps(reruns, indent=2, default=str))
        for r in [] if args.json else reruns:
            delta = "" if r["delta"] is None else f" delta {100 * r['delta']:+.1f} pts"
            print(f"{r['rerun_id']}  {r['created_at']:%Y-%m-%d %H:%M}  set {(r['set'] or {}).get('name')!r}  "
                  f"policy {r['policy']}  {r['status']}{delta}  fixed {r['fixed']} broke {r['broke']}")
        return 0
    if args.show:
        report = get_rerun(lake, args.show)
    else:
        if not args.set or not args.policy:
            raise InvalidInput("--set and --policy are required (or --list / --show)")
        spec = RerunSpec(set=args.set, policy=args.policy, env=args.env, n=args.n, max_steps=args.max_steps,
                         seed=args.seed, confidence=args.confidence, model_url=args.model_url,
                         model=args.model, servers=tuple(args.server), serial=args.serial)
        with tqdm(desc="rerun", unit="episode", disable=args.json or None) as bar:
            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            report = run_rerun(lake, spec, progress)
    if args.json:
        print(json.dumps(report, indent=2))
    elif "tasks" in report:
        print(render(report))
    else:
        print(f"re-run {args.show}: {report.get('status')} {report.get('error', '')}".rstrip())
    return 0
