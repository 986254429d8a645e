"""`elake train`: the online GiGPO/GRPO loop on the simulated phone (flags: `TrainConfig`)."""

from __future__ import annotations

import argparse

from episodelake.trainer.config import add_arguments, from_arguments

DESCRIPTION = """\
Each iteration samples --tasks training tasks, runs --group-size rollouts of each on the
simulated phone (recorded into the lake), computes GiGPO or GRPO advantages with SQL over
the recorded steps, updates the policy with PPO-clip, evaluates it on held-out tasks, writes
the iteration's metrics to the `runs` table and saves a checkpoint. Continue a run with
--resume --run-id ID. The advantages use this trainer's tuned defaults (see
trainer/README.md); --reference-defaults computes them exactly as the reference trainer does.
Training starts by printing which set is in use. Example:
  elake train --env sim --algo gigpo --policy tiny --group-size 8 --tasks 8 --iterations 20
"""


def register(commands) -> None:
    parser = commands.add("train", "train a policy online on the simulated phone (GiGPO/GRPO)")
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_arguments(parser)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    parser.set_defaults(func=cmd_train)


def cmd_train(args) -> int:
    from episodelake.lake import Lake
    from episodelake.trainer.loop import train

    config = from_arguments(args)  # a ConfigError is a LakeError: one line, no traceback
    # Which advantage equations a run used decides what its curves mean: say it up front.
    print(config.advantage_summary(), flush=True)
    result = train(config, Lake(args.lake), progress=not args.no_progress)
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
