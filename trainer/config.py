"""`TrainConfig`: every knob of the online loop, with its help, its default and its checks.

One dataclass is the single source of defaults: `elake train` builds its flags from the
fields (``help`` and ``choices`` live in each field's metadata), the loop reads it, and the
run's ``runs.config`` column stores it as JSON. ``__post_init__`` refuses combinations that
cannot work and says which flag to change.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from episodelake.lake.errors import InvalidInput
from episodelake.trainer.advantages import ALGOS, MODES, compute_advantages

POLICIES = ("tiny", "vlm")
ENVS = ("sim",)
DIFFICULTIES = ("easy", "medium", "hard", "all")
ENGINES = ("auto", "deepspeed", "torch")
GENERATORS = ("auto", "vllm", "transformers")
DTYPES = ("auto", "bfloat16", "float16", "float32")

#: The DeepSpeed config shipped with the package (ZeRO stage 2).
DEFAULT_DEEPSPEED_CONFIG = Path(__file__).parent / "configs" / "zero2.json"

#: Learning rates that suit each policy when --lr is not given (the tiny policy's: 2e-3
#: learned the toggles too slowly in 30 minutes, 6e-3 collapsed onto one tap everywhere).
DEFAULT_LR = {"tiny": 3e-3, "vlm": 1e-6}
#: Upper clip ranges when --clip-eps-high is not given: wide for the tiny policy, whose good
#: taps start at a fraction of a percent; DAPO's value for language models.
DEFAULT_CLIP_HIGH = {"tiny": 1.0, "vlm": 0.28}
#: Entropy bonus when --entropy-coef is not given: the tiny policy needs enough of it to
#: keep trying other rows while one is being rewarded.
DEFAULT_ENTROPY = {"tiny": 0.01, "vlm": 0.001}


#: The settings of the advantage equations (each a `compute_advantages` argument).
ADVANTAGE_SETTINGS = ("mode", "gamma", "step_advantage_w", "invalid_penalty",
                      "normalize_step_rewards", "revisit_rewards", "dynamic_sampling")
#: The reference trainer's values: `compute_advantages`' own defaults, which follow it.
REFERENCE_ADVANTAGES = {name: inspect.signature(compute_advantages).parameters[name].default
                        for name in ADVANTAGE_SETTINGS}
#: Where this trainer's defaults differ from the reference's (why: trainer/README.md).
TUNED_ADVANTAGES = {"normalize_step_rewards": False, "revisit_rewards": False}


def _field(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


class ConfigError(InvalidInput):
    """A setting, or a combination of settings, that cannot work; the message names the fix."""


@dataclass
class TrainConfig:
    # --- what to train, on what --------------------------------------------------------------
    algo: str = _field("gigpo", "advantage estimator: gigpo (episode + anchor-state terms) or "
                       "grpo (episode term only)", ALGOS)
    policy: str = _field("tiny", "tiny: the small CPU network; vlm: a Hugging Face image-text "
                         "model from --model-path", POLICIES)
    env: str = _field("sim", "where episodes run: the simulated phone", ENVS)
    difficulty: str = _field("easy", "which sim task templates to train and evaluate on",
                             DIFFICULTIES)
    # --- the run -----------------------------------------------------------------------------
    run_id: str | None = _field(None, "id of the run (episodes.run_id, runs.run_id, the "
                                "checkpoint folder); default train-<algo>-<policy>-<time>")
    resume: bool = _field(False, "continue --run-id from its last checkpoint")
    checkpoint_dir: str | None = _field(None, "where checkpoints go; default "
                                        "<lake>/_checkpoints/<run_id>")
    iterations: int = _field(20, "iterations to reach (a resumed run counts those it has)")
    seed: int = _field(0, "seed of task sampling, rollouts and the policy's initial weights")
    threads: int | None = _field(None, "torch CPU threads; default 1 for tiny (small ops run "
                                 "fastest on one thread, above all on a shared CPU), torch's "
                                 "own choice for vlm")
    # --- rollouts ----------------------------------------------------------------------------
    tasks: int = _field(8, "tasks per iteration; each is one episode group")
    group_size: int = _field(8, "rollouts per task (the GRPO/GiGPO group size)")
    max_steps: int = _field(6, "steps after which an episode is stopped (easy tasks need at "
                            "most 4; raise it for medium and hard ones)")
    workers: int = _field(1, "rollout worker processes")
    holdout: float = _field(0.3, "fraction of the tasks never trained on; evaluation uses them")
    eval_repeats: int = _field(4, "evaluation episodes per held-out task after each update "
                               "(0: no evaluation)")
    # --- advantages (see trainer/advantages.py) ----------------------------------------------
    mode: str = _field("mean_norm", "normalisation: v - mean, or (v - mean) / (std + eps)", MODES)
    gamma: float = _field(0.95, "discount of the step returns")
    step_advantage_w: float = _field(1.0, "weight of the anchor-state term (gigpo only)")
    invalid_penalty: float = _field(0.1, "subtracted from steps whose action was invalid")
    step_rewards: bool = _field(True, "score every step with the sim's rule-based judge "
                                "(progress toward the goal: 1, else 0)")
    normalize_step_rewards: bool | None = _field(None, "divide intermediate step rewards by "
                                                 "the episode's steps minus one, as the "
                                                 "reference does; off by default (on with "
                                                 "--reference-defaults): it pays one good "
                                                 "step and an immediate stop as much as a "
                                                 "whole task's progress, and policies learn "
                                                 "to stop early")
    revisit_rewards: bool | None = _field(None, "pay a step's judge reward also when it leads "
                                          "back to a state the episode was already in "
                                          "(anchor_key), as the reference does; off by default "
                                          "(on with --reference-defaults): a loop such as open "
                                          "Settings, back, open Settings is paid once, so a "
                                          "policy cannot farm the judge instead of doing the "
                                          "task")
    reference_defaults: bool = _field(False, "compute advantages exactly as the reference "
                                      "trainer: --normalize-step-rewards and --revisit-rewards "
                                      "on, and every other advantage setting at the "
                                      "reference's value (giving one that differs is refused)")
    dynamic_sampling: bool = _field(False, "drop groups whose episodes all got the same reward")
    # --- the update --------------------------------------------------------------------------
    lr: float | None = _field(None, "learning rate; default 3e-3 for tiny, 1e-6 for vlm")
    ppo_epochs: int = _field(4, "passes over each iteration's steps")
    minibatch_size: int = _field(64, "steps per optimizer step")
    micro_batch_size: int = _field(64, "steps per forward/backward; gradients accumulate up "
                                   "to --minibatch-size")
    clip_eps: float = _field(0.2, "PPO clip range of the probability ratio")
    clip_eps_high: float | None = _field(None, "upper clip range (DAPO's clip-higher); "
                                         "default 1.0 for tiny, 0.28 for vlm")
    kl_coef: float = _field(0.0, "weight of the KL term to the frozen initial policy (0: none)")
    entropy_coef: float | None = _field(None, "weight of the entropy bonus; default 0.01 for "
                                        "tiny, 0.001 for vlm")
    max_grad_norm: float = _field(1.0, "gradient clipping norm")
    engine: str = _field("auto", "optimizer engine: deepspeed (ZeRO, --deepspeed-config), "
                         "torch, or auto (deepspeed for vlm when it can run, else torch)", ENGINES)
    deepspeed_config: str = _field(str(DEFAULT_DEEPSPEED_CONFIG), "DeepSpeed JSON config; the "
                                   "trainer fills batch sizes, clipping and precision")
    # --- the VLM policy ----------------------------------------------------------------------
    model_path: str | None = _field(None, "local folder of a Hugging Face image-text model "
                                    "(Qwen2-VL / Qwen2.5-VL family) for --policy vlm")
    generation: str = _field("auto", "vlm generation: vllm (GPU, the `gpu` extra), "
                             "transformers, or auto (vllm when importable with a GPU)", GENERATORS)
    history_length: int = _field(2, "vlm: earlier screenshots shown in the prompt")
    max_new_tokens: int = _field(256, "vlm: longest response")
    temperature: float = _field(1.0, "vlm: sampling temperature of rollouts")
    max_pixels: int = _field(1024 * 28 * 28, "vlm: screenshots are resized to at most this "
                             "many pixels")
    dtype: str = _field("auto", "vlm weights: auto is bfloat16 on a GPU, float32 on CPU", DTYPES)
    vllm_gpu_memory: float = _field(0.3, "vlm: share of GPU memory vLLM may take")

    def __post_init__(self) -> None:
        for name, choices in (("algo", ALGOS), ("policy", POLICIES), ("env", ENVS),
                              ("difficulty", DIFFICULTIES), ("mode", MODES),
                              ("engine", ENGINES), ("generation", GENERATORS),
                              ("dtype", DTYPES)):
            if getattr(self, name) not in choices:
                raise ConfigError(f"{name}: {getattr(self, name)!r} is not one of "
                                  f"{', '.join(choices)}")
        for name in ("iterations", "tasks", "max_steps", "workers", "ppo_epochs",
                     "minibatch_size", "micro_batch_size", "max_new_tokens", "max_pixels"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}: must be >= 1, got {getattr(self, name)}")
        self._resolve_advantage_defaults()
        if self.entropy_coef is None:
            self.entropy_coef = DEFAULT_ENTROPY[self.policy]
        for name in ("eval_repeats", "history_length", "kl_coef", "entropy_coef", "clip_eps",
                     "invalid_penalty"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: must be >= 0, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ConfigError(f"group_size: {self.group_size} leaves every episode without a "
                              "baseline (its advantage is always 0); use --group-size 2 or more")
        if not 0.0 <= self.holdout < 1.0:
            raise ConfigError(f"holdout: must be in [0, 1), got {self.holdout}")
        if self.eval_repeats and self.holdout == 0.0:
            raise ConfigError("eval_repeats: evaluation runs on held-out tasks but --holdout "
                              "is 0; set --holdout (e.g. 0.3) or --eval-repeats 0")
        if not 0.0 <= self.gamma <= 1.0:
            raise ConfigError(f"gamma: must be in [0, 1], got {self.gamma}")
        if self.minibatch_size % self.micro_batch_size:
            raise ConfigError(f"micro_batch_size: {self.micro_batch_size} must divide "
                              f"--minibatch-size {self.minibatch_size}")
        if self.resume and not self.run_id:
            raise ConfigError("resume: needs --run-id of the run to continue")
        if self.lr is None:
            self.lr = DEFAULT_LR[self.policy]
        if self.clip_eps_high is None:
            self.clip_eps_high = max(self.clip_eps, DEFAULT_CLIP_HIGH[self.policy])
        if self.clip_eps_high < self.clip_eps:
            raise ConfigError(f"clip_eps_high: {self.clip_eps_high} is below --clip-eps "
                              f"{self.clip_eps}; the upper range is the same or wider")
        if self.threads is None:
            self.threads = 1 if self.policy == "tiny" else 0
        if self.threads < 0:
            raise ConfigError(f"threads: must be >= 0 (0: torch's default), got {self.threads}")
        if self.lr <= 0:
            raise ConfigError(f"lr: must be > 0, got {self.lr}")
        if self.policy == "vlm":
            if not self.model_path:
                raise ConfigError("model_path: --policy vlm needs --model-path DIR, a local "
                                  "Hugging Face folder (config.json, weights, tokenizer), e.g. "
                                  "one made by `huggingface-cli download Qwen/Qwen2-VL-2B-Instruct "
                                  "--local-dir DIR`")
            if self.workers != 1:
                raise ConfigError(f"workers: --policy vlm generates in the trainer process; "
                                  f"use --workers 1 (got {self.workers})")
        else:
            if self.model_path:
                raise ConfigError("model_path: only --policy vlm loads a model; drop "
                                  "--model-path or pass --policy vlm")
            if self.generation == "vllm":
                raise ConfigError("generation: vllm generates for --policy vlm only")

    def _resolve_advantage_defaults(self) -> None:
        """Fill the unset advantage settings from the tuned or the reference set, and refuse a
        setting that would make `--reference-defaults` compute something else."""
        defaults = REFERENCE_ADVANTAGES if self.reference_defaults else \
            {**REFERENCE_ADVANTAGES, **TUNED_ADVANTAGES}
        for name in TUNED_ADVANTAGES:
            if getattr(self, name) is None:
                setattr(self, name, defaults[name])
        if not self.reference_defaults:
            return
        for name, value in REFERENCE_ADVANTAGES.items():
            given = getattr(self, name)
            if given != value:
                flag = "--" + name.replace("_", "-")
                if isinstance(value, bool):
                    wanted, given_flag = (flag, "--no-" + flag[2:]) if value else ("--no-" + flag[2:], flag)
                else:
                    wanted, given_flag = f"{flag} {value}", flag
                raise ConfigError(f"{name}: --reference-defaults computes advantages as the "
                                  f"reference does ({wanted}), not with {given!r}; drop "
                                  f"{given_flag} or --reference-defaults")

    def advantage_summary(self) -> str:
        """One line naming the set of advantage settings in use (printed when training starts)."""
        values = {name: getattr(self, name) for name in ADVANTAGE_SETTINGS}
        if self.reference_defaults:
            kind = "reference defaults"
        elif values == {**REFERENCE_ADVANTAGES, **TUNED_ADVANTAGES}:
            kind = "tuned defaults"
        elif values == REFERENCE_ADVANTAGES:
            kind = "the reference's settings"
        else:
            kind = "custom settings"
        shown = ", ".join(f"{name}={value}" for name, value in values.items())
        return f"advantages: {kind} ({shown})"

    def advantage_options(self) -> dict[str, Any]:
        """Keyword arguments of `compute_advantages` taken from this config."""
        return {
            "algo": self.algo,
            "mode": self.mode,
            "gamma": self.gamma,
            "step_advantage_w": self.step_advantage_w,
            "invalid_penalty": self.invalid_penalty,
            "normalize_step_rewards": self.normalize_step_rewards,
            "revisit_rewards": self.revisit_rewards,
            "dynamic_sampling": self.dynamic_sampling,
        }

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        data = json.loads(text)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"config: unknown setting(s) {unknown}")
        return cls(**data)


#: Settings whose default depends on others (None until `__post_init__`), and their type.
RESOLVED = {"lr": float, "threads": int, "clip_eps_high": float, "entropy_coef": float,
            "normalize_step_rewards": bool, "revisit_rewards": bool}

#: Settings a resumed run may change; every other one must match the stored config.
RESUMABLE = frozenset({"run_id", "iterations", "resume", "workers", "checkpoint_dir", "threads",
                       "deepspeed_config"})


def add_arguments(parser) -> None:
    """One ``--flag`` per field, with its help and default (booleans get ``--no-<flag>``)."""
    import argparse

    defaults = TrainConfig()
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        default = None if f.name in RESOLVED else getattr(defaults, f.name)
        help_text = f.metadata["help"]
        if isinstance(default, bool) or RESOLVED.get(f.name) is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default,
                                help=help_text)
            continue
        kind = RESOLVED.get(f.name) or (type(default) if default is not None else str)
        shown = "" if default is None else f" (default {default})"
        parser.add_argument(flag, type=kind, default=default, choices=f.metadata["choices"],
                            help=help_text + shown)


def from_arguments(args) -> TrainConfig:
    """The config the parsed `add_arguments` flags describe."""
    return TrainConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)})
