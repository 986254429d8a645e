"""`elake train`: the online GiGPO/GRPO loop on the simulated phone (flags: `TrainConfig`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from episodelake.api.cli.app import Commands, globals_of
from episodelake.api.cli.model_options import Fields, with_fields
from episodelake.trainer.advantages import AdvantageConfig
from episodelake.trainer.config import TrainConfig

DESCRIPTION = """\
Each iteration samples --tasks training tasks, runs --group-size rollouts of each on the
simulated phone (recorded into the lake), computes GiGPO or GRPO advantages with SQL over
the recorded steps, updates the policy with PPO-clip, evaluates it on held-out tasks, writes
the iteration's metrics to the `runs` table and saves a checkpoint. Continue a run with
--resume --run-id ID. The advantages use this trainer's tuned defaults (see
docs/training.md); --reference-defaults computes them exactly as the reference trainer does.
Training starts by printing which set is in use.

Example:

\b
  elake train --env sim --algo gigpo --policy tiny --group-size 8 --tasks 8 --iterations 20
"""

commands = Commands()


@commands.command("train", summary="train a policy online on the simulated phone (GiGPO/GRPO)",
                  description=DESCRIPTION)
@with_fields(Fields(AdvantageConfig, heading="advantages"), Fields(TrainConfig, heading="training"))
def cmd_train(
    ctx: typer.Context,
    given: dict[str, Any],
    reference_defaults: Annotated[bool, typer.Option(
        "--reference-defaults",
        rich_help_panel="advantages", help="compute advantages exactly as the reference trainer: "
        "--normalize-step-rewards and --revisit-rewards on, and every other advantage setting at "
        "the reference's value (giving one that differs is refused)")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="hide the progress bars")] = False,
) -> int:
    from episodelake.lake import Lake
    from episodelake.trainer.loop import train

    # A ConfigError is an InvalidInput: one line, no traceback.
    config = TrainConfig.from_settings(given, reference_defaults=reference_defaults)
    # Which advantage equations a run used decides what its curves mean: say it up front.
    print(config.advantage_summary(), flush=True)
    lake = Lake(globals_of(ctx).lake)
    result = train(config, lake, progress=not no_progress)
    # lineage: each checkpoint this session wrote, with the episodes that trained it
    from episodelake.lake.ops.lineage import record_training, warmup_output
    from episodelake.trainer.checkpoint import iteration_folder

    for iteration in range(config.iterations - len(result.metrics), config.iterations):
        record_training(lake, result.run_id, iteration, str(iteration_folder(result.checkpoint_dir, iteration)),
                        config=config.model_dump(mode="json"))
    if result.warmup is not None:
        losses = result.warmup.losses
        print(f"sft warm-up: {result.warmup.steps} step(s), loss {losses[0]:.4f} -> "
              f"{losses[-1]:.4f}; what it read: elake lineage {warmup_output(result.run_id)}")
    last = result.metrics[-1] if result.metrics else None
    print(f"run {result.run_id}: {len(result.metrics)} iteration(s) this session; "
          f"checkpoints in {result.checkpoint_dir}")
    if last is not None:
        held_out = last["eval_success_rate"]
        print(f"last iteration: success {last['success_rate']:.1%}, held-out "
              f"{'-' if held_out is None else f'{held_out:.1%}'}")
    print(f"metrics: elake sql \"SELECT iteration, metrics FROM runs WHERE run_id = "
          f"'{result.run_id}' ORDER BY iteration\"")
    return 0
