"""`elake rerun`: re-run a set's tasks with a new policy and report what changed."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import typer

from episodelake.api.cli.app import Commands, globals_of
from episodelake.collectors.jobs.rerun import ENVS

_EPILOG = """examples:

\b
  elake rerun --set login-failures --policy oracle --env sim --n 3
  elake rerun --set regressions --policy model --model-url http://127.0.0.1:8000/v1 --model ckpt-40 --n 5
  elake rerun --set regressions --policy model --env mobileworld --server http://10.0.0.5:8000 ...
  elake rerun --list
  elake rerun --show rerun-0123456789ab --json"""

commands = Commands()


@commands.command("rerun", summary="re-run every task of a set with a new policy: per task before/after, "
                  "fixed/broke, overall delta with a confidence interval", epilog=_EPILOG)
def cmd_rerun(
    ctx: typer.Context,
    set_name: Annotated[str | None, typer.Option("--set", help="the set's name or id")] = None,
    policy: Annotated[str | None, typer.Option(
        help="oracle | noisy[:P] | random (demo policies, env sim) | model")] = None,
    env: Annotated[Literal[ENVS], typer.Option(  # type: ignore[valid-type]  # the re-run's tuple of environments
        help="where to run (default sim)", show_default=False)] = "sim",
    n: Annotated[int, typer.Option(help="episodes per task (default 3)", show_default=False)] = 3,
    max_steps: Annotated[int, typer.Option(help="step limit per episode (default 20)", show_default=False)] = 20,
    seed: Annotated[int, typer.Option(help="seed of the sim phone and demo policies")] = 0,
    confidence: Annotated[float, typer.Option(help="interval level (default 0.95)", show_default=False)] = 0.95,
    model_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server for --policy model")] = None,
    model: Annotated[str | None, typer.Option(help="model name on that server")] = None,
    server: Annotated[list[str] | None, typer.Option(metavar="URL", help="environment server URL (env mobileworld)")] = None,
    serial: Annotated[str | None, typer.Option(help="adb device serial (env adb; default: the only one "
                                               "attached)")] = None,
    list_all: Annotated[bool, typer.Option("--list", help="list earlier re-runs")] = False,
    show: Annotated[str | None, typer.Option(metavar="RERUN_ID", help="print an earlier re-run's report")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> int:
    from tqdm import tqdm

    from episodelake.collectors.jobs.rerun import (
        RerunSpec,
        get_rerun,
        list_reruns,
        render,
        run_rerun,
    )
    from episodelake.lake.storage.errors import InvalidInput
    from episodelake.lake.storage.lake import Lake

    lake = Lake(globals_of(ctx).lake, create=False)
    if list_all:
        reruns = list_reruns(lake)
        if as_json:
            print(json.dumps(reruns, indent=2, default=str))
        for r in [] if as_json else reruns:
            delta = "" if r["delta"] is None else f" delta {100 * r['delta']:+.1f} pts"
            print(f"{r['rerun_id']}  {r['created_at']:%Y-%m-%d %H:%M}  set {(r['set'] or {}).get('name')!r}  "
                  f"policy {r['policy']}  {r['status']}{delta}  fixed {r['fixed']} broke {r['broke']}")
        return 0
    if show:
        report = get_rerun(lake, show)
    else:
        if not set_name or not policy:
            raise InvalidInput("--set and --policy are required (or --list / --show)")
        spec = RerunSpec(set=set_name, policy=policy, env=env, n=n, max_steps=max_steps, seed=seed,
                         confidence=confidence, model_url=model_url, model=model,
                         servers=tuple(server or ()), serial=serial)
        with tqdm(desc="rerun", unit="episode", disable=as_json or None) as bar:
            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            report = run_rerun(lake, spec, progress)
    if as_json:
        print(json.dumps(report, indent=2))
    elif "tasks" in report:
        print(render(report))
    else:
        print(f"re-run {show}: {report.get('status')} {(report.get('error') or {}).get('message', '')}".rstrip())
    return 0
