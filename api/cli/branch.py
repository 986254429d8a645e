"""`elake branch`: N continuations of recorded episodes from their state at a step."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from episodelake.api.cli.app import Commands, globals_of
from episodelake.lake.derive.anchor import DEFAULT_THRESHOLD

_EPILOG = """examples:

\b
  elake branch 3f2a9c1e-... --at 4 --n 8 --policy random
  elake branch 3f2a9c1e-... --at failing --n 4 --model-url http://127.0.0.1:8000/v1 --model ckpt-40
  elake branch --set login-failures --at failing --n 3 --policy oracle
  elake branch --where "run_id = 'r7' AND success = false" --at failing --n 2 --policy noisy:0.2 --json

\b
The parent's device is reset to its task and seed and its recorded actions 0..K-1 are carried
out again (sim, adb, mobileworld alike); each replayed screen is checked against the parent's
(UI-tree hash, else perceptual hash within --threshold bits). A branch whose screen diverged
is refused, naming the episode and the step, and nothing of it is recorded. Each branch is an
episode of its own (branch_of, branch_step; replayed rows marked in steps.info), in the
parent's episode group. See docs/branching.md."""

commands = Commands()


@commands.command("branch", summary="record N continuations of episodes from their state at step K "
                  "(or their failing step), by replaying the recorded actions", epilog=_EPILOG)
def cmd_branch(
    ctx: typer.Context,
    episode_ids: Annotated[list[str] | None, typer.Argument(
        metavar="EPISODE_ID", help="the parent episodes (or choose them with --set / --where)",
        show_default=False)] = None,
    at: Annotated[str, typer.Option(
        metavar="K|failing", show_default=False,
        help="the parent's step to branch at: a step number, or failing (default): a curator's "
        "failing_step, else the first step the judge scored below 0.5")] = "failing",
    n: Annotated[int, typer.Option(help="branches per parent (default 3)", show_default=False)] = 3,
    policy: Annotated[str | None, typer.Option(
        help="random | oracle | noisy[:P] (the sim's demo policies), or give --model-url and --model")] = None,
    model_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server of the agent model")] = None,
    model: Annotated[str | None, typer.Option(help="the agent model's name on that server")] = None,
    set_name: Annotated[str | None, typer.Option("--set", metavar="NAME",
                                                 help="branch the members of this set")] = None,
    where: Annotated[str | None, typer.Option(
        metavar="SQL", help="branch the episodes with a step meeting this condition over "
        "`episodes JOIN steps`, as for `export sft`")] = None,
    max_steps: Annotated[int, typer.Option(help="steps of a branch's whole trajectory, the replayed "
                                           "ones included (default 20)", show_default=False)] = 20,
    seed: Annotated[int, typer.Option(help="seed of the branches' agents (default 0)", show_default=False)] = 0,
    threshold: Annotated[int, typer.Option(
        metavar="BITS", show_default=False,
        help=f"largest perceptual-hash distance of a replayed screen from the parent's, where "
        f"there is no UI tree to compare (default {DEFAULT_THRESHOLD}; 2 for JPEG sources)")] = DEFAULT_THRESHOLD,
    server: Annotated[list[str] | None, typer.Option(
        metavar="URL", help="environment server URL (parents recorded on env mobileworld)")] = None,
    serial: Annotated[str | None, typer.Option(help="adb device serial (parents recorded on env adb)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> int:
    from tqdm import tqdm

    from episodelake.collectors.jobs.branch import BranchSpec, run_branches
    from episodelake.lake.storage.errors import InvalidInput
    from episodelake.lake.storage.lake import Lake

    if model_url or model:
        if policy not in (None, "model"):
            raise InvalidInput("choose one policy: --policy or --model-url/--model")
        policy = "model"
    if policy is None:
        raise InvalidInput("choose the policy: --policy random|oracle|noisy[:P], or --model-url URL --model NAME")
    spec = BranchSpec(episode_ids=tuple(episode_ids or ()), set=set_name, where=where, at=at, n=n,
                      policy=policy, model_url=model_url, model=model, max_steps=max_steps, seed=seed,
                      threshold=threshold, servers=tuple(server or ()), serial=serial)
    lake = Lake(globals_of(ctx).lake, create=False)
    with tqdm(desc="branch", unit="branch", disable=as_json or None) as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        report = run_branches(lake, spec, progress)
    if as_json:
        print(json.dumps(report, indent=2, default=str))
    else:
        for b in report["branches"]:
            print(f"{b['parent']} at step {b['step']} -> {b['episode_id']}: {b['status']}, "
                  f"success {b['success']}, {b['steps']} steps")
        print(f"branch job {report['branch_id']}: {report['recorded']} branch(es) recorded, "
              f"{report['successes']} successful, {len(report['refused'])} refused")
    for refused in report["refused"]:
        print(f"refused: {refused['error']}", file=sys.stderr)
    return 1 if report["refused"] else 0
