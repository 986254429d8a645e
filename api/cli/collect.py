"""`elake collect adb|remote|sim`, `elake serve-env --sim`, `elake judge`: episodes from devices.

Every `collect` kind builds worker specs (device + policy) and runs them through
:func:`~episodelake.collectors.jobs.batch.run_batch`, the batch runner every episode job shares:
one worker by default, `--workers N` threads (collection waits on devices, not CPUs), or Ray
actors with `--ray`.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from episodelake.lake.errors import InvalidInput


def register(commands) -> None:
    collect = commands.add("collect", "run an agent on phones and record its episodes")
    kinds = collect.add_subparsers(dest="kind", metavar="KIND", required=True)

    p = kinds.add_parser("adb", help="a real Android phone over adb",
                         description="Drive phones attached over adb (USB or `adb connect`). "
                         "--dry-run reads the screen and records what would be sent, sending nothing.")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--serial", help="the phone's serial (`adb devices`); default: the only one")
    which.add_argument("--all", action="store_true", help="one collector per ready phone")
    which.add_argument("--list", action="store_true", help="list attached phones and their state")
    p.add_argument("--dry-run", action="store_true", help="never send input to the phone")
    p.add_argument("--ui-tree", action="store_true", help="store a uiautomator dump with each step")
    p.add_argument("--apps", type=Path, help='JSON file {"app label": "package"} for `open`')
    _add_policy(p, random=False)
    _add_run(p, task_help="the goal, in words (repeatable)", parallel=False)
    p.set_defaults(func=cmd_collect_adb)

    p = kinds.add_parser("remote", help="phones behind ClawGUI-Server / MobileWorld servers",
                         description="Drive environment servers over their HTTP API. Servers that "
                         "fail move to the back of the list (spares).")
    servers = p.add_mutually_exclusive_group(required=True)
    servers.add_argument("--server", action="append", metavar="URL",
                         help="server URL, or URL#DEVICE (repeatable)")
    servers.add_argument("--server-file", type=Path, help="file with one server URL a line")
    p.add_argument("--token", default=os.environ.get("ELAKE_ENV_TOKEN"),
                   help="bearer token for the servers (default $ELAKE_ENV_TOKEN)")
    _add_policy(p, random=True)
    _add_run(p, task_help="a task name the servers know (repeatable)", parallel=True)
    p.set_defaults(func=cmd_collect_remote)

    p = kinds.add_parser("sim", help="the simulated phone, in this process",
                         description="Run tasks of the simulated phone's registry.")
    p.add_argument("--seed", type=int, default=0, help="phone seed (default 0)")
    p.add_argument("--sample", type=int, metavar="N", help="N tasks sampled from the registry")
    _add_policy(p, random=True, oracle=True)
    _add_run(p, task_help="a task id of the registry (repeatable)", parallel=True)
    p.set_defaults(func=cmd_collect_sim)

    p = commands.add("serve-env", "serve simulated phones through the ClawGUI-Server / MobileWorld API")
    p.add_argument("--sim", action="store_true", required=True, help="serve the simulated phone")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any "
                   "other needs --token)")
    p.add_argument("--port", type=int, default=6800, help="port (default 6800)")
    p.add_argument("--devices", type=int, default=1, help="phones to serve (sim-0, sim-1, ...)")
    p.add_argument("--seed", type=int, default=0, help="phone seed (default 0)")
    p.add_argument("--token", default=os.environ.get("ELAKE_ENV_TOKEN"),
                   help="require 'Authorization: Bearer TOKEN' (default $ELAKE_ENV_TOKEN)")
    p.add_argument("--list-tasks", action="store_true", help="print the task ids and exit")
    p.set_defaults(func=cmd_serve_env)

    p = commands.add("judge", "back-fill step rewards of stored episodes with a VLM judge")
    chosen = p.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--set", dest="set_name", metavar="NAME", help="the episodes of this set")
    chosen.add_argument("--where", metavar="SQL", help="a condition over the episodes table, "
                        "e.g. \"run_id = 'r7' AND status = 'finished'\"")
    p.add_argument("--model-url", required=True, help="OpenAI-compatible base URL, e.g. "
                   "http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True, help="the judge model's name on that server")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the API key, if any (default OPENAI_API_KEY)")
    p.add_argument("--cache", type=Path, help="SQLite file that keeps verdicts across runs")
    p.add_argument("--attempts", type=int, default=3, help="asks per step when answers are invalid")
    p.add_argument("--redo", action="store_true", help="judge steps that already have a reward too")
    p.set_defaults(func=cmd_judge)


def _add_policy(p: argparse.ArgumentParser, *, random: bool, oracle: bool = False) -> None:
    g = p.add_argument_group("policy")
    g.add_argument("--model-url", help="OpenAI-compatible base URL of the agent model, e.g. "
                   "http://127.0.0.1:8000/v1 (vLLM serve)")
    g.add_argument("--model", help="the agent model's name on that server")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the API key, if any (default OPENAI_API_KEY)")
    g.add_argument("--style", choices=("mai-ui", "gui-owl"), default="mai-ui", help="prompt style")
    g.add_argument("--history", type=int, default=3, help="past screenshots in the prompt (default 3)")
    choices = [c for c, on in (("random", random), ("oracle", oracle)) if on]
    if choices:
        g.add_argument("--policy", choices=choices, help="a built-in policy instead of a model")


def _add_run(p: argparse.ArgumentParser, *, task_help: str, parallel: bool) -> None:
    g = p.add_argument_group("run")
    g.add_argument("--task", action="append", default=[], help=task_help)
    g.add_argument("--task-file", type=Path, help="tasks, one a line (text or JSON with name, "
                   "goal, repeat)")
    g.add_argument("--repeat", type=int, default=1,
                   help="episodes per task, sharing a group id (default 1)")
    g.add_argument("--max-steps", type=int, default=20, help="steps per episode (default 20)")
    g.add_argument("--run-id", help="the episodes' run_id (default collect-<time>)")
    g.add_argument("--tag", action="append", default=[], help="episode tag (repeatable)")
    g.add_argument("--ray", action="store_true", help="run the collectors as Ray actors")
    g.add_argument("--ray-address", help="an existing Ray cluster (default: start one here)")
    if parallel:
        g.add_argument("--workers", type=int, default=1, help="collectors in parallel (default 1)")


# --- building the run -------------------------------------------------------------------------

def _settings(args):
    from episodelake.collectors.jobs.batch import RunSettings

    run_id = args.run_id or datetime.now(UTC).strftime("collect-%Y%m%dT%H%M%S")
    return RunSettings(run_id, max_steps=args.max_steps, tags=tuple(args.tag))


def _tasks(args, run_id: str, extra: Sequence[str] = ()):
    from episodelake.collectors.jobs.tasks import grouped_tasks, load_tasks

    tasks = grouped_tasks([(t, None, args.repeat) for t in [*args.task, *extra]], run_id)
    if args.task_file:
        tasks += load_tasks(args.task_file, repeat=args.repeat, run_id=run_id)
    if not tasks:
        raise InvalidInput("no task: pass --task or --task-file")
    return tasks


def _policy(args):
    from episodelake.collectors.jobs.batch import ModelSpec, OracleSpec, RandomSpec

    builtin = getattr(args, "policy", None)
    if builtin and args.model_url:
        raise InvalidInput("choose one policy: --policy or --model-url/--model")
    if builtin == "random":
        return RandomSpec()
    if builtin == "oracle":
        return OracleSpec()
    if not args.model_url or not args.model:
        raise InvalidInput("the agent model needs --model-url URL and --model NAME "
                           "(e.g. --model-url http://127.0.0.1:8000/v1 --model MAI-UI-2B)")
    return ModelSpec(args.model_url, args.model, api_key=os.environ.get(args.api_key_env),
                     style=args.style, history_length=args.history)


def _run(args, workers, tasks, settings) -> int:
    from episodelake.collectors.jobs.batch import run_batch

    print(f"collecting {len(tasks)} episode(s) with {len(workers)} worker(s) into {args.lake} "
          f"(run {settings.run_id}; Ctrl-C aborts running episodes, keeping their steps)")
    report = run_batch(args.lake, workers, tasks, settings,
                       backend="ray" if args.ray else "thread", ray_address=args.ray_address)
    counts = Counter(e.status for e in report.episodes)
    won = sum(1 for e in report.episodes if e.success)
    print(", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
          + f"; {won} successful; {report.commits} lake commit(s)")
    for line in report.stopped_workers:
        print(f"stopped {line}")
    return 0 if counts.get("finished") else 1


# --- commands ---------------------------------------------------------------------------------

def cmd_collect_adb(args) -> int:
    from episodelake.collectors.envs import adb
    from episodelake.collectors.jobs.batch import AdbSpec

    if args.list:
        for device in adb.list_devices():
            note = "ready" if device.ready else device.problem()
            print(f"{device.serial}\t{device.state}\t{device.model or ''}\t{note}")
        return 0
    apps = {}
    if args.apps:
        try:
            apps = json.loads(args.apps.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"--apps {args.apps}: {exc}") from None
    serials = adb.ready_serials() if args.all else [args.serial]
    settings = _settings(args)
    if args.dry_run:
        settings = replace(settings, tags=(*settings.tags, "dry-run"))
    policy = _policy(args)
    workers = [(AdbSpec(s, args.dry_run, args.ui_tree, apps), policy) for s in serials]
    return _run(args, workers, _tasks(args, settings.run_id), settings)


def cmd_collect_remote(args) -> int:
    from episodelake.collectors.envs.remote import RemoteOptions, read_server_file
    from episodelake.collectors.jobs.batch import split_servers

    urls = args.server or read_server_file(args.server_file)
    policy = _policy(args)
    specs = split_servers(urls, args.workers, RemoteOptions(token=args.token))
    settings = _settings(args)
    return _run(args, [(s, policy) for s in specs], _tasks(args, settings.run_id), settings)


def cmd_collect_sim(args) -> int:
    from episodelake.collectors.envs.sim.tasks import sample_tasks
    from episodelake.collectors.jobs.batch import SimSpec

    settings = _settings(args)
    sampled = [t.id for t in sample_tasks(args.sample, args.seed)] if args.sample else []
    policy = _policy(args)
    workers = [(SimSpec(args.seed, f"sim-{i}"), policy) for i in range(args.workers)]
    return _run(args, workers, _tasks(args, settings.run_id, sampled), settings)


def cmd_serve_env(args) -> None:
    from episodelake.collectors.envs.server import serve
    from episodelake.collectors.envs.sim.device import SimDevice, task_infos

    tasks = task_infos()
    if args.list_tasks:
        for t in tasks:
            print(f"{t.name}\t{t.goal}")
        return
    if args.devices < 1:
        raise InvalidInput("--devices must be at least 1")
    devices = {f"sim-{i}": SimDevice(args.seed, name=f"sim-{i}") for i in range(args.devices)}
    print(f"serving {len(devices)} simulated phone(s) and {len(tasks)} tasks on "
          f"http://{args.host}:{args.port} (Ctrl-C stops)")
    serve(devices, tasks, host=args.host, port=args.port, token=args.token)


def cmd_judge(args) -> None:
    from episodelake.collectors.agents.judge import JudgeCache, StepJudge
    from episodelake.collectors.agents.model_client import ModelClient, ModelOptions
    from episodelake.collectors.jobs.backfill import backfill, select_episodes
    from episodelake.lake.lake import Lake

    lake = Lake(args.lake, create=False)
    episodes = select_episodes(lake, set_name=args.set_name, where=args.where)
    if not episodes:
        print("no episode matches; nothing to judge")
        return
    cache = JudgeCache(args.cache)
    options = ModelOptions(temperature=0.1, max_tokens=512)
    client = ModelClient(args.model_url, args.model, api_key=os.environ.get(args.api_key_env),
                         options=options)
    try:
        report = backfill(lake, StepJudge(client, attempts=args.attempts, cache=cache), episodes,
                          redo=args.redo)
    finally:
        client.close()
        cache.close()
    print(report.summary())
