"""`elake rollout` and `elake demo`: episodes from the simulated phone, no phone or GPU needed."""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Literal

import typer

from episodelake.api.cli.app import Commands, globals_of
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake
from episodelake.lake.vocab.seeds import derive

#: The demo's two "checkpoints": an earlier, noisier policy and a later, better one, so the
#: stats pages have a success rate that moves across policy_version.
DEMO_POLICIES = (("ckpt-10", "demo"), ("ckpt-20", "light"))
#: What `elake demo` derives for every step (and OCR text when the ocr extra is installed), so
#: search, similar screens and thumbnails work on the demo lake as soon as it is made.
DEMO_ENRICH = ("phash", "thumbs", "embed")
NOISE_TO_CATEGORY = {"grounding": "grounding", "planning": "planning",
                     "premature_terminate": "planning", "loop": "other"}


commands = Commands()


@commands.command("rollout", summary="run N tasks x G rollouts on a simulated phone and record them")
def cmd_rollout(
    ctx: typer.Context,
    env: Annotated[Literal["sim"], typer.Option(help="environment (default sim)", show_default=False)] = "sim",
    tasks: Annotated[int, typer.Option(help="number of tasks sampled (default 8)", show_default=False)] = 8,
    task: Annotated[list[str] | None, typer.Option(
        metavar="ID", help="a task id instead of sampling, e.g. 'wifi_on' (repeatable)")] = None,
    group_size: Annotated[int, typer.Option(help="rollouts per task, one group (default 8)",
                                            show_default=False)] = 8,
    max_steps: Annotated[int, typer.Option(help="steps after which an episode is stopped")] = 15,
    workers: Annotated[int, typer.Option(help="worker processes (default 1)", show_default=False)] = 1,
    noise: Annotated[Literal["none", "light", "demo"], typer.Option(
        show_default=False, help="demo policy mistakes: none (the oracle), light, demo (default)")] = "demo",
    run_id: Annotated[str | None, typer.Option(help="the episodes' run_id (default: a new id)")] = None,
    policy_version: Annotated[str, typer.Option(help="the episodes' policy_version")] = "demo",
    seed: Annotated[int, typer.Option(help="seed of task sampling, the phone and the policy")] = 0,
) -> None:
    from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts, task_ids

    ids = task_ids(task or tasks, seed=seed)
    spec = RolloutSpec(ids, group_size=group_size, max_steps=max_steps,
                       run_id=run_id or new_run_id("rollout"), policy_version=policy_version, seed=seed)
    report = run_rollouts(Lake(globals_of(ctx).lake), spec, demo_agent(noise), workers=workers)
    print(report.summary())


def new_run_id(kind: str) -> str:
    return f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


@commands.command("demo", summary="create a demo lake: simulated episodes, step rewards, a failure set, tags")
def cmd_demo(
    ctx: typer.Context,
    tasks: Annotated[int, typer.Option(help="tasks (default 40)", show_default=False)] = 40,
    group_size: Annotated[int, typer.Option(help="rollouts per task per checkpoint (default 4)",
                                            show_default=False)] = 4,
    workers: Annotated[int, typer.Option(help="worker processes")] = 2,
    seed: Annotated[int, typer.Option(help="seed of task sampling, the phone and the policies")] = 0,
    enrich: Annotated[str, typer.Option(
        metavar="NAMES", show_default=False,
        help="derived columns to fill once recorded: comma-separated elake enrich names, or none "
        "(default phash,thumbs,embed: seconds; add ocr for text search and redaction, about a "
        "second a screen per worker, 15-30 minutes here, or let `elake serve --background-enrich "
        "phash,ocr` fill it while the lake is browsed, as `just up` does)")] = ",".join(DEMO_ENRICH),
) -> None:
    from episodelake.collectors.jobs.enrich import derivations
    from episodelake.collectors.jobs.enrich import enrich as enrich_steps
    from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts, task_ids

    names = [n.strip() for n in enrich.split(",") if n.strip() not in ("", "none")]
    if names:
        derivations(names)  # an unknown name stops the demo before it records anything
    lake = Lake(globals_of(ctx).lake)
    if lake.dataset("episodes").count_rows():
        raise InvalidInput(f"{lake.path} already holds episodes; give a new --lake for the demo")
    ids = task_ids(tasks, seed=seed)
    started = time.perf_counter()
    total = 0
    for i, (version, noise) in enumerate(DEMO_POLICIES):
        spec = RolloutSpec(ids, group_size=group_size, run_id=f"demo-{version}", policy_version=version,
                           seed=derive(seed, "demo", i), batch=f"b{i}", image_checks="structure")
        report = run_rollouts(lake, spec, demo_agent(noise), workers=workers)
        print(report.summary())
        total += len(report.episodes)
        lake.create_tag(f"demo-{version}")
    curated = curate_failures(lake)
    if names:
        print(enrich_steps(lake, names, workers=workers, progress=True).summary())
    lake.optimize(prune_older_than=None)
    counts = lake.sql("select count(*) n, avg(success::int) rate from episodes").to_pylist()[0]
    print(f"demo lake {lake.path}: {counts['n']} episodes ({total} recorded now), success "
          f"{counts['rate']:.0%}, failure set 'demo failures' with {curated} episodes, tags "
          f"{', '.join(sorted(lake.tags()))}, in {time.perf_counter() - started:.0f} s")


def curate_failures(lake: Lake, limit: int = 24) -> int:
    """A failure set from the demo's failed episodes, categorised by the mistake behind them."""
    from episodelake.lake.curation import curation

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
