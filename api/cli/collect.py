"""`elake collect DEVICE`, `elake serve-env --sim`, `elake judge`: episodes from devices.

`elake collect` has one command per registered device (`collectors/envs/devices.py`: adb,
remote, sim), built from its `DeviceKind`: its options, then the shared policy and run
options. Every `collect` kind builds worker specs (device + policy) and runs them through
:func:`~episodelake.collectors.jobs.batch.run_batch`, the batch runner every episode job shares:
one worker by default, `--workers N` threads (collection waits on devices, not CPUs), or Ray
actors with `--ray`.
"""

from __future__ import annotations

import inspect
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from episodelake.api.cli.app import Commands, UsageError, globals_of
from episodelake.api.cli.model_options import Fields, with_fields, with_parameters
from episodelake.api.settings import EnvSettings
from episodelake.collectors.envs.base import DeviceKind, DeviceOption
from episodelake.collectors.envs.devices import DEVICES
from episodelake.collectors.jobs.bulk import RayOptions
from episodelake.lake.derive.anchor import DEFAULT_THRESHOLD
from episodelake.lake.storage.errors import InvalidInput

# --- options several commands share -----------------------------------------------------------

ModelUrl = Annotated[str | None, typer.Option(
    rich_help_panel="policy", help="OpenAI-compatible base URL of the agent model, e.g. "
    "http://127.0.0.1:8000/v1 (vLLM serve)")]
ModelName = Annotated[str | None, typer.Option(rich_help_panel="policy",
                                               help="the agent model's name on that server")]
ApiKeyEnv = Annotated[str, typer.Option(
    rich_help_panel="policy", show_default=False,
    help="environment variable holding the API key, if any (default OPENAI_API_KEY)")]
Style = Annotated[Literal["mai-ui", "gui-owl"], typer.Option(rich_help_panel="policy", help="prompt style")]
History = Annotated[int, typer.Option(rich_help_panel="policy", show_default=False,
                                      help="past screenshots in the prompt (default 3)")]
TaskFile = Annotated[Path | None, typer.Option(
    rich_help_panel="run", help="tasks, one a line (text or JSON with name, goal, repeat)")]
Repeat = Annotated[int, typer.Option(rich_help_panel="run", show_default=False,
                                     help="episodes per task, sharing a group id (default 1)")]
MaxSteps = Annotated[int, typer.Option(rich_help_panel="run", show_default=False,
                                       help="steps per episode (default 20)")]
RunId = Annotated[str | None, typer.Option(rich_help_panel="run",
                                           help="the episodes' run_id (default collect-<time>)")]
Tags = Annotated[list[str] | None, typer.Option("--tag", metavar="TAG", rich_help_panel="run",
                                                help="episode tag (repeatable)")]
Ray = Annotated[bool, typer.Option("--ray", rich_help_panel="run", help="run the collectors as Ray actors")]
RayAddress = Annotated[str | None, typer.Option(rich_help_panel="run",
                                                help="an existing Ray cluster (default: start one here)")]
Workers = Annotated[int, typer.Option(rich_help_panel="run", show_default=False,
                                      help="collectors in parallel (default 1)")]
Seed = Annotated[int, typer.Option(help="phone seed (default 0)", show_default=False)]
ENV_TOKEN_HELP = f"(default ${EnvSettings.variable('env_token')})"


def exclusive(ctx: typer.Context, flags: dict[str, object], *, required: bool) -> None:
    """Refuse more than one of `flags` (by flag: the value given, or None/False), or none when
    `required`: a usage error, like an unknown option."""
    given = [flag for flag, value in flags.items() if value not in (None, False, [])]
    if len(given) > 1:
        raise UsageError(f"give only one of {', '.join(given)}", ctx=ctx)
    if required and not given:
        raise UsageError(f"{next(iter(flags))} is required" if len(flags) == 1 else
                         f"give one of {', '.join(flags)}", ctx=ctx)


@dataclass(frozen=True)
class PolicyChoice:
    """The policy options: a built-in policy, or an agent model behind an OpenAI-compatible API."""

    builtin: str | None
    model_url: str | None
    model: str | None
    api_key_env: str
    style: str
    history: int

    def spec(self) -> Any:
        from episodelake.collectors.jobs.batch import ModelSpec, OracleSpec, RandomSpec

        if self.builtin and self.model_url:
            raise InvalidInput("choose one policy: --policy or --model-url/--model")
        if self.builtin == "random":
            return RandomSpec()
        if self.builtin == "oracle":
            return OracleSpec()
        if not self.model_url or not self.model:
            raise InvalidInput("the agent model needs --model-url URL and --model NAME "
                               "(e.g. --model-url http://127.0.0.1:8000/v1 --model MAI-UI-2B)")
        return ModelSpec(self.model_url, self.model, api_key=os.environ.get(self.api_key_env),
                         style=self.style, history_length=self.history)


@dataclass(frozen=True)
class RunChoice:
    """The run options: which tasks, how often, under which run id and tags, on which backend."""

    task: Sequence[str]
    task_file: Path | None
    repeat: int
    max_steps: int
    run_id: str | None
    tags: Sequence[str]
    ray: bool
    ray_address: str | None

    def settings(self, *extra_tags: str) -> Any:
        from episodelake.collectors.jobs.batch import RunSettings

        run_id = self.run_id or datetime.now(UTC).strftime("collect-%Y%m%dT%H%M%S")
        return RunSettings(run_id, max_steps=self.max_steps, tags=(*self.tags, *extra_tags))

    def tasks(self, run_id: str, extra: Sequence[str] = ()) -> list:
        from episodelake.collectors.jobs.tasks import grouped_tasks, load_tasks

        tasks = grouped_tasks([(t, None, self.repeat) for t in [*self.task, *extra]], run_id)
        if self.task_file:
            tasks += load_tasks(self.task_file, repeat=self.repeat, run_id=run_id)
        if not tasks:
            raise InvalidInput("no task: pass --task or --task-file")
        return tasks

    def run(self, lake: str, workers: Sequence, settings: Any, extra: Sequence[str] = ()) -> int:
        from episodelake.collectors.jobs.batch import run_batch

        tasks = self.tasks(settings.run_id, extra)
        print(f"collecting {len(tasks)} episode(s) with {len(workers)} worker(s) into {lake} "
              f"(run {settings.run_id}; Ctrl-C aborts running episodes, keeping their steps)")
        report = run_batch(lake, workers, tasks, settings,
                           backend="ray" if self.ray else "thread", ray_address=self.ray_address)
        counts = Counter(e.status for e in report.episodes)
        won = sum(1 for e in report.episodes if e.success)
        print(", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
              + f"; {won} successful; {report.commits} lake commit(s)")
        for line in report.stopped_workers:
            print(f"stopped {line}")
        return 0 if counts.get("finished") else 1


def _shared(*options: tuple[str, Any, Any]) -> list[inspect.Parameter]:
    return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
            for name, kind, default in options]


#: The policy and run options of every `collect` kind, in help order. A kind's own `--policy`
#: and `--task` (their choices and wording differ by kind) are its own parameters.
POLICY_OPTIONS = _shared(("model_url", ModelUrl, None), ("model", ModelName, None),
                         ("api_key_env", ApiKeyEnv, "OPENAI_API_KEY"), ("style", Style, "mai-ui"),
                         ("history", History, 3))
RUN_OPTIONS = _shared(("task_file", TaskFile, None), ("repeat", Repeat, 1), ("max_steps", MaxSteps, 20),
                      ("run_id", RunId, None), ("tag", Tags, None), ("ray", Ray, False),
                      ("ray_address", RayAddress, None))


def _choices(values: dict[str, Any]) -> dict[str, Any]:
    policy = PolicyChoice(None, **{p.name: values[p.name] for p in POLICY_OPTIONS})
    run = RunChoice((), values["task_file"], values["repeat"], values["max_steps"], values["run_id"],
                    tuple(values["tag"] or ()), values["ray"], values["ray_address"])
    return {"policy_choice": policy, "run_choice": run}


#: A `collect` kind takes the shared options as `policy_choice` and `run_choice`, and completes
#: them with its own `--policy` and `--task`.
collecting = with_parameters([*POLICY_OPTIONS, *RUN_OPTIONS], _choices, into=["policy_choice", "run_choice"])


# --- commands ---------------------------------------------------------------------------------

#: `elake collect KIND`, and the other commands of this module.
kinds = Commands(help="run an agent on phones and record its episodes")
commands = Commands()


def _option(option: DeviceOption) -> inspect.Parameter:
    """A device option as the command's parameter (see `DeviceOption`)."""
    flag = option.flag or "--" + option.name.replace("_", "-")
    help_text = option.help if option.from_env is None else \
        f"{option.help} (default ${EnvSettings.variable(option.from_env)})"
    decl = typer.Option(flag, help=help_text, metavar=option.metavar, rich_help_panel=option.panel,
                        show_default=option.show_default)
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=option.default,
                             annotation=Annotated[option.type, decl])


def _choice(values: tuple[str, ...]) -> Any:
    """``Literal[values]`` for values known at run time: Typer offers them as the flag's choices."""
    return Literal.__getitem__(values)


def _device_options(kind: DeviceKind) -> list[inspect.Parameter]:
    """A device's own options, then `--policy` (its built-in policies, if any), `--task` in
    its words and, for a device several workers can share, `--workers`."""
    params = [_option(option) for option in kind.options]
    if kind.policies:
        params += _shared(("policy", Annotated[_choice(kind.policies) | None, typer.Option(
            rich_help_panel="policy", help="a built-in policy instead of a model")], None))
    params += _shared(("task", Annotated[list[str] | None, typer.Option(
        metavar="TASK", rich_help_panel="run", help=kind.task_help)], None))
    if kind.workers:
        params += _shared(("workers", Workers, 1))
    return params


def _device_command(kind: DeviceKind) -> Any:
    """`elake collect KIND`: the device's options become worker specs (`kind.collect`), run
    with the shared policy and run options."""
    flags = {o.name: o.flag or "--" + o.name.replace("_", "-") for o in kind.options}

    def command(ctx: typer.Context, policy_choice: PolicyChoice, run_choice: RunChoice,
                **values: Any) -> int:
        for group in kind.exclusive:
            exclusive(ctx, {flags[name]: values[name] for name in group.names}, required=group.required)
        environment = globals_of(ctx).environment
        for option in kind.options:
            if option.from_env is not None and values[option.name] is None:
                values[option.name] = getattr(environment, option.from_env)
        collection = kind.collect(values)
        if collection.lines is not None:
            for line in collection.lines:
                print(line)
            return 0
        run = replace(run_choice, task=values["task"] or ())
        settings = run.settings(*collection.tags)
        agent = replace(policy_choice, builtin=values.get("policy")).spec()
        return run.run(globals_of(ctx).lake, [(device, agent) for device in collection.devices],
                       settings, collection.tasks)

    fixed = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
             *_shared(("policy_choice", PolicyChoice, None), ("run_choice", RunChoice, None))]
    command.__signature__ = inspect.Signature([*fixed, *_device_options(kind)])  # type: ignore[attr-defined]  # functions take it; Callable does not declare it
    command.__name__ = command.__qualname__ = f"cmd_collect_{kind.name}"
    return command


for _kind in DEVICES.values():
    kinds.command(_kind.name, summary=_kind.summary, description=_kind.description)(
        collecting(_device_command(_kind)))


@commands.command("serve-env", summary="serve simulated phones through the ClawGUI-Server / MobileWorld API")
def cmd_serve_env(
    ctx: typer.Context,
    sim: Annotated[bool, typer.Option("--sim", help="serve the simulated phone (required)")] = False,
    host: Annotated[str, typer.Option(show_default=False, help="address to bind (default 127.0.0.1; "
                                      "any other needs --token)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port (default 6800)", show_default=False)] = 6800,
    devices: Annotated[int, typer.Option(help="phones to serve (sim-0, sim-1, ...)")] = 1,
    seed: Seed = 0,
    token: Annotated[str | None, typer.Option(
        show_default=False, help=f"require 'Authorization: Bearer TOKEN' {ENV_TOKEN_HELP}")] = None,
    list_tasks: Annotated[bool, typer.Option("--list-tasks", help="print the task ids and exit")] = False,
) -> None:
    from episodelake.collectors.envs.server import serve
    from episodelake.collectors.envs.sim.device import SimDevice, task_infos

    exclusive(ctx, {"--sim": sim}, required=True)
    tasks = task_infos()
    if list_tasks:
        for t in tasks:
            print(f"{t.name}\t{t.goal}")
        return
    if devices < 1:
        raise InvalidInput("--devices must be at least 1")
    phones = {f"sim-{i}": SimDevice(seed, name=f"sim-{i}") for i in range(devices)}
    print(f"serving {len(phones)} simulated phone(s) and {len(tasks)} tasks on "
          f"http://{host}:{port} (Ctrl-C stops)")
    token = token if token is not None else globals_of(ctx).environment.env_token
    serve(phones, tasks, host=host, port=port, token=token)


@commands.command("judge", summary="back-fill step rewards of stored episodes with a VLM judge")
@with_fields(Fields(RayOptions, heading="cluster"))
def cmd_judge(
    ctx: typer.Context,
    given: dict[str, Any],
    model_url: Annotated[str, typer.Option(
        show_default=False, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")],
    model: Annotated[str, typer.Option(show_default=False, help="the judge model's name on that server")],
    set_name: Annotated[str | None, typer.Option("--set", metavar="NAME", help="the episodes of this set")] = None,
    where: Annotated[str | None, typer.Option(metavar="SQL", help="the episodes with a step meeting this "
                                              "condition over `episodes JOIN steps`, as for `export sft`, "
                                              "e.g. \"run_id = 'r7' AND status = 'finished'\"")] = None,
    api_key_env: Annotated[str, typer.Option(
        show_default=False,
        help="environment variable holding the API key, if any (default OPENAI_API_KEY; with "
        "--ray each worker reads its own)")] = "OPENAI_API_KEY",
    cache: Annotated[Path | None, typer.Option(help="SQLite file that keeps verdicts across runs")] = None,
    attempts: Annotated[int, typer.Option(help="asks per step when answers are invalid")] = 3,
    redo: Annotated[bool, typer.Option("--redo", help="judge steps that already have a reward too")] = False,
) -> None:
    from episodelake.collectors.agents.judge import JudgeCache, StepJudge
    from episodelake.collectors.agents.model_client import ModelClient, ModelOptions
    from episodelake.collectors.jobs.backfill import backfill
    from episodelake.lake.export.selection import select_episodes
    from episodelake.lake.storage.lake import Lake

    exclusive(ctx, {"--set": set_name, "--where": where}, required=True)
    lake = Lake(globals_of(ctx).lake, create=False)
    episodes = select_episodes(lake, set_name=set_name, where=where)
    if not episodes:
        print("no episode matches; nothing to judge")
        return
    verdicts = JudgeCache(cache)
    options = ModelOptions(temperature=0.1, max_tokens=512)
    client = ModelClient(model_url, model, api_key=os.environ.get(api_key_env), options=options)
    try:
        report = backfill(lake, StepJudge(client, attempts=attempts, cache=verdicts), episodes, redo=redo,
                          ray=RayOptions(**given), api_key_env=api_key_env)
    finally:
        client.close()
        verdicts.close()
    print(report.summary())


@commands.command("rekey", summary="recompute the anchor keys of stored steps (after changing the "
                  "clustering threshold, or for steps recorded without keys)",
                  description="Recompute the anchor keys of the grouped episodes of a set, of a "
                  "condition, or (neither given) of the whole lake, the way the recorder keys "
                  "them; perceptual hashes computed on the way are stored too. Episodes without a "
                  "group id are left alone.")
@with_fields(Fields(RayOptions, heading="cluster"))
def cmd_rekey(
    ctx: typer.Context,
    given: dict[str, Any],
    set_name: Annotated[str | None, typer.Option("--set", metavar="NAME", help="the episodes of this set")] = None,
    where: Annotated[str | None, typer.Option(metavar="SQL", help="the episodes with a step meeting this "
                                              "condition over `episodes JOIN steps`, as for `export sft`")] = None,
    threshold: Annotated[int, typer.Option(metavar="BITS", show_default=False, help="largest Hamming distance in bits "
                                           f"between two screenshots of one anchor state (default "
                                           f"{DEFAULT_THRESHOLD})")] = DEFAULT_THRESHOLD,
    embedding_threshold: Annotated[float | None, typer.Option(
        metavar="DIST", show_default=False, help="key steps without a UI tree by their screen embeddings "
        "(`elake enrich --what embed`), those within this distance being one state (0: identical "
        "screens only), instead of by perceptual hash")] = None,
) -> None:
    from episodelake.collectors.jobs.rekey import rekey_anchors
    from episodelake.lake.storage.lake import Lake

    exclusive(ctx, {"--set": set_name, "--where": where}, required=False)
    report = rekey_anchors(Lake(globals_of(ctx).lake, create=False), set_name=set_name, where=where,
                           threshold=threshold, embedding_threshold=embedding_threshold, ray=RayOptions(**given))
    print(report.summary())
