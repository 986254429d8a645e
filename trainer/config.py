"""`TrainConfig`: every knob of the online loop, with its help, its default and its checks.

One pydantic model is the single source of defaults: `elake train` builds its flags from the
fields (each field's description is its help, a `Literal` type its choices), the advantage
settings are the one `AdvantageConfig` (`TrainConfig.advantages`, a flag per setting), the
loop reads it, and the run's ``runs.config`` column and its checkpoints store it as JSON. A
validator refuses combinations that cannot work and says which flag to change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.spec_model import SpecModel
from episodelake.trainer.advantages import REFERENCE_ADVANTAGES, TUNED_ADVANTAGES, AdvantageConfig

Policy = Literal["tiny", "screen", "vlm"]
Env = Literal["sim"]
Difficulty = Literal["easy", "medium", "hard", "long", "all"]
Engine = Literal["auto", "deepspeed", "torch"]
Generator = Literal["auto", "vllm", "transformers"]
Dtype = Literal["auto", "bfloat16", "float16", "float32"]
RolloutBackend = Literal["process", "ray"]
Branching = Literal["none", "failing"]

#: The DeepSpeed config shipped with the package (ZeRO stage 2).
DEFAULT_DEEPSPEED_CONFIG = Path(__file__).parent / "configs" / "zero2.json"

#: Learning rates that suit each policy when --lr is not given (the tiny policy's: 2e-3
#: learned the toggles too slowly in 30 minutes, 6e-3 collapsed onto one tap everywhere).
DEFAULT_LR = {"tiny": 3e-3, "screen": 3e-3, "vlm": 1e-6}
#: Upper clip ranges when --clip-eps-high is not given: wide for the tiny policy, whose good
#: taps start at a fraction of a percent; DAPO's value for language models.
DEFAULT_CLIP_HIGH = {"tiny": 1.0, "screen": 1.0, "vlm": 0.28}
#: Entropy bonus when --entropy-coef is not given: the tiny policy needs enough of it to
#: keep trying other rows while one is being rewarded.
DEFAULT_ENTROPY = {"tiny": 0.01, "screen": 0.01, "vlm": 0.001}


class ConfigError(InvalidInput):
    """A setting, or a combination of settings, that cannot work; the message names the fix."""


class TrainConfig(SpecModel):
    error = ConfigError
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # --- what to train, on what --------------------------------------------------------------
    policy: Policy = Field(
        "tiny", description="tiny: the small CPU network; screen: a small CPU network that reads "
        "the screen's text and element positions (UI tree, else OCR boxes); vlm: a Hugging Face "
        "image-text model from --model-path")
    env: Env = Field("sim", description="where episodes run: the simulated phone")
    difficulty: Difficulty = Field(
        "easy", description="which sim task templates to train and evaluate on (long: 8-20 steps, "
        "with fixed held-out values; raise --max-steps to about 24)")
    templates: str | None = Field(
        None, description="comma-separated sim task templates to train and evaluate on, of any "
        "difficulty, instead of --difficulty's (e.g. notes_create,contacts_add,dial_number)")
    # --- the run -----------------------------------------------------------------------------
    run_id: str | None = Field(None, description="id of the run (episodes.run_id, runs.run_id, "
                               "the checkpoint folder); default train-<algo>-<policy>-<time>")
    resume: bool = Field(False, description="continue --run-id from its last checkpoint")
    checkpoint_dir: str | None = Field(None, description="where checkpoints go; default "
                                       "<lake>/_checkpoints/<run_id>")
    iterations: int = Field(20, ge=1, description="iterations to reach (a resumed run counts "
                            "those it has)")
    seed: int = Field(0, description="seed of task sampling, rollouts and the policy's initial "
                      "weights")
    threads: int | None = Field(None, ge=0, description="torch CPU threads (0: torch's own "
                                "choice); default 1 for tiny (small ops run fastest on one "
                                "thread, above all on a shared CPU), 0 for vlm")
    # --- rollouts ----------------------------------------------------------------------------
    tasks: int = Field(8, ge=1, description="tasks per iteration; each is one episode group")
    group_size: int = Field(8, description="rollouts per task (the GRPO/GiGPO group size)")
    max_steps: int = Field(6, ge=1, description="steps after which an episode is stopped (easy "
                           "tasks need at most 4; raise it for medium and hard ones)")
    workers: int = Field(1, ge=1, description="rollout workers")
    rollout_backend: RolloutBackend = Field(
        "process", description="where rollout workers run: process (spawned here) or ray (Ray "
        "actors, each writing to the lake itself; the lake must be storage every node reaches)")
    ray_address: str | None = Field(None, description="the Ray cluster of --rollout-backend ray "
                                    "(default: start one here)")
    branch: Branching = Field(
        "none", description="failing: each iteration, play group_size - branch_n rollouts of each "
        "task, then branch_n more of the group from its failed episodes, each replayed to the step "
        "the judge first scored low and continued by the policy (docs/branching.md); the same "
        "episodes per group, so the same episode budget. A group with no failed episode plays "
        "branch_n fresh rollouts instead")
    branch_n: int = Field(2, ge=1, description="with --branch failing: the episodes of each group "
                          "played as branches of its failed episodes")
    holdout: float = Field(0.3, ge=0.0, lt=1.0, description="fraction of the tasks never "
                           "trained on; evaluation uses them")
    eval_repeats: int = Field(4, ge=0, description="evaluation episodes per held-out task after "
                              "each update (0: no evaluation)")
    # --- advantages (see trainer/advantages.py) ----------------------------------------------
    advantages: AdvantageConfig = Field(
        TUNED_ADVANTAGES, description="the advantage equations' settings (one flag each); "
        "--reference-defaults starts from the reference trainer's")
    step_rewards: bool = Field(True, description="score every step with the sim's rule-based "
                               "judge (progress toward the goal: 1, else 0)")
    # --- the update --------------------------------------------------------------------------
    lr: float | None = Field(None, gt=0.0, description="learning rate; default 3e-3 for tiny, "
                             "1e-6 for vlm")
    lr_decay_to: float = Field(1.0, gt=0.0, le=1.0, description="learning rate at the last "
                               "iteration, as a fraction of --lr, reached linearly (1: constant)")
    ppo_epochs: int = Field(4, ge=1, description="passes over each iteration's steps")
    target_kl: float | None = Field(None, gt=0.0, description="stop an iteration's PPO epochs "
                                    "once a minibatch's approximate KL to the rollout policy "
                                    "passes 1.5x this (default: all epochs)")
    minibatch_size: int = Field(64, ge=1, description="steps per optimizer step")
    micro_batch_size: int = Field(64, ge=1, description="steps per forward/backward; gradients "
                                  "accumulate up to --minibatch-size")
    clip_eps: float = Field(0.2, ge=0.0, description="PPO clip range of the probability ratio")
    clip_eps_high: float | None = Field(None, description="upper clip range (DAPO's "
                                        "clip-higher); default 1.0 for tiny, 0.28 for vlm")
    kl_coef: float = Field(0.0, ge=0.0, description="weight of the KL term to the frozen "
                           "initial policy (0: none)")
    entropy_coef: float | None = Field(None, ge=0.0, description="weight of the entropy bonus; "
                                       "default 0.01 for tiny, 0.001 for vlm")
    max_grad_norm: float = Field(1.0, description="gradient clipping norm")
    engine: Engine = Field(
        "auto", description="optimizer engine: deepspeed (ZeRO, --deepspeed-config), torch, or "
        "auto (deepspeed for vlm when it can run, else torch)")
    deepspeed_config: str = Field(str(DEFAULT_DEEPSPEED_CONFIG), description="DeepSpeed JSON "
                                  "config; the trainer fills batch sizes, clipping and precision")
    # --- the VLM policy ----------------------------------------------------------------------
    model_path: str | None = Field(None, description="local folder of a Hugging Face image-text "
                                   "model (Qwen2-VL / Qwen2.5-VL family) for --policy vlm")
    generation: Generator = Field(
        "auto", description="vlm generation: vllm (GPU, the `gpu` extra), transformers, or auto "
        "(vllm when importable with a GPU)")
    history_length: int = Field(2, ge=0, description="vlm: earlier screenshots shown in the prompt")
    max_new_tokens: int = Field(256, ge=1, description="vlm: longest response")
    temperature: float = Field(1.0, description="vlm: sampling temperature of rollouts")
    max_pixels: int = Field(1024 * 28 * 28, ge=1, description="vlm: screenshots are resized to "
                            "at most this many pixels")
    dtype: Dtype = Field(
        "auto", description="vlm weights: auto is bfloat16 on a GPU, float32 on CPU")
    vllm_gpu_memory: float = Field(0.3, description="vlm: share of GPU memory vLLM may take")
    # --- the SFT warm-up of the VLM policy (trainer/warmup.py) --------------------------------
    sft_warmup_steps: int = Field(0, ge=0, description="vlm: supervised steps on lake data "
                                  "before the first RL iteration, read with sft_dataset (0: none)")
    sft_warmup_set: str | None = Field(None, description="vlm: the curation set the SFT warm-up "
                                       "learns from (its successful episodes)")
    sft_warmup_where: str | None = Field(None, description="vlm: SQL condition over episodes "
                                         "JOIN steps selecting what the SFT warm-up learns from "
                                         "(as `elake export sft --where`)")
    sft_warmup_lr: float | None = Field(None, gt=0.0, description="vlm: learning rate of the SFT "
                                        "warm-up; default --lr")

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        """Fill the defaults that depend on the policy; refuse what cannot work, naming the fix."""
        if self.group_size < 2:
            raise ConfigError(f"group_size: {self.group_size} leaves every episode without a "
                              "baseline (its advantage is always 0); use --group-size 2 or more")
        if self.branch != "none" and self.branch_n >= self.group_size:
            raise ConfigError(f"branch_n: {self.branch_n} branches leave no fresh rollout to branch "
                              f"from in a group of {self.group_size}; use --branch-n below "
                              "--group-size")
        if self.eval_repeats and self.holdout == 0.0:
            raise ConfigError("eval_repeats: evaluation runs on held-out tasks but --holdout "
                              "is 0; set --holdout (e.g. 0.3) or --eval-repeats 0")
        if self.minibatch_size % self.micro_batch_size:
            raise ConfigError(f"micro_batch_size: {self.micro_batch_size} must divide "
                              f"--minibatch-size {self.minibatch_size}")
        if self.templates is not None:
            self.templates = _check_templates(self.templates, self.env)
        if self.resume and not self.run_id:
            raise ConfigError("resume: needs --run-id of the run to continue")
        if self.lr is None:
            self.lr = DEFAULT_LR[self.policy]
        if self.entropy_coef is None:
            self.entropy_coef = DEFAULT_ENTROPY[self.policy]
        if self.clip_eps_high is None:
            self.clip_eps_high = max(self.clip_eps, DEFAULT_CLIP_HIGH[self.policy])
        if self.clip_eps_high < self.clip_eps:
            raise ConfigError(f"clip_eps_high: {self.clip_eps_high} is below --clip-eps "
                              f"{self.clip_eps}; the upper range is the same or wider")
        if self.threads is None:
            self.threads = 0 if self.policy == "vlm" else 1
        self._check_sft_warmup()
        if self.policy == "vlm":
            if not self.model_path:
                raise ConfigError("model_path: --policy vlm needs --model-path DIR, a local "
                                  "Hugging Face folder (config.json, weights, tokenizer), e.g. "
                                  "one made by `huggingface-cli download Qwen/Qwen2-VL-2B-Instruct "
                                  "--local-dir DIR`")
            if self.workers != 1:
                raise ConfigError(f"workers: --policy vlm generates in the trainer process; "
                                  f"use --workers 1 (got {self.workers})")
            if self.rollout_backend != "process":
                raise ConfigError("rollout_backend: --policy vlm generates in the trainer "
                                  "process; use --rollout-backend process")
        else:
            if self.model_path:
                raise ConfigError("model_path: only --policy vlm loads a model; drop "
                                  "--model-path or pass --policy vlm")
            if self.generation == "vllm":
                raise ConfigError("generation: vllm generates for --policy vlm only")
        return self

    def _check_sft_warmup(self) -> None:
        selection = self.sft_warmup_set is not None or self.sft_warmup_where is not None
        if self.sft_warmup_steps and self.policy != "vlm":
            raise ConfigError(f"sft_warmup_steps: the SFT warm-up trains --policy vlm only (the "
                              f"{self.policy} policy does not read chat samples); drop "
                              "--sft-warmup-steps or pass --policy vlm")
        if self.sft_warmup_steps and not selection:
            raise ConfigError("sft_warmup_steps: say what the warm-up learns from with "
                              "--sft-warmup-set NAME or --sft-warmup-where SQL (e.g. \"task_name "
                              "= 'wifi_on'\")")
        if selection and not self.sft_warmup_steps:
            raise ConfigError("sft_warmup_steps: --sft-warmup-set/--sft-warmup-where choose the "
                              "warm-up's data; give --sft-warmup-steps N (N > 0) to run it")

    def advantage_summary(self) -> str:
        """One line naming the set of advantage settings in use (printed when training starts)."""
        if self.advantages == TUNED_ADVANTAGES:
            kind = "tuned defaults"
        elif self.advantages == REFERENCE_ADVANTAGES:
            kind = "reference defaults"
        else:
            kind = "custom settings"
        shown = ", ".join(f"{name}={value}" for name, value in self.advantages.model_dump().items())
        return f"advantages: {kind} ({shown})"

    def settings(self) -> dict[str, Any]:
        """Every setting by its flag's name, the advantage settings among them."""
        return {**self.model_dump(exclude={"advantages"}), **self.advantages.model_dump()}

    @classmethod
    def from_settings(cls, given: dict[str, Any], *, reference_defaults: bool = False) -> TrainConfig:
        """The config of the settings `given` by name, as `settings()` names them (`elake
        train`'s flags); the others keep their defaults. With `reference_defaults` the
        advantage settings start from the reference trainer's, and one given that differs
        from them is refused."""
        advantages = {name: value for name, value in given.items() if name in AdvantageConfig.model_fields}
        base = TUNED_ADVANTAGES
        if reference_defaults:
            base = REFERENCE_ADVANTAGES
            for name, value in advantages.items():
                _refuse_changing_the_reference(name, value)
        return cls(**{name: value for name, value in given.items() if name not in advantages},
                   advantages={**base.model_dump(), **advantages})

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        """A stored config; one stored before the advantage settings had their own model (flat,
        with `reference_defaults`, whose values were stored resolved) reads the same."""
        data = json.loads(text)
        flat = {name: data.pop(name) for name in list(data) if name in AdvantageConfig.model_fields}
        data.pop("reference_defaults", None)
        if flat:
            data["advantages"] = {**data.get("advantages", {}), **flat}
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            raise ConfigError(f"config: unknown setting(s) {unknown}")
        return cls(**data)


#: Settings a resumed run may change; every other one must match the stored config.
RESUMABLE = frozenset({"run_id", "iterations", "resume", "workers", "checkpoint_dir", "threads",
                       "deepspeed_config", "rollout_backend", "ray_address"})


def _check_templates(text: str, env: str) -> str:
    """The `templates` setting, normalised; a name the env's suite lacks is refused by name."""
    from episodelake.collectors.envs.suites import get_suite

    templates = get_suite(env).templates
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in templates]
    if not names or unknown:
        raise ConfigError(f"templates: {', '.join(unknown) or repr(text)} is not a {env} task "
                          f"template; templates: {', '.join(templates)}")
    return ",".join(dict.fromkeys(names))


def _refuse_changing_the_reference(name: str, given: Any) -> None:
    """`--reference-defaults` means the reference's equations: a flag that changes them is a
    contradiction, not an override."""
    value = getattr(REFERENCE_ADVANTAGES, name)
    if given == value:
        return
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        wanted, given_flag = (flag, "--no-" + flag[2:]) if value else ("--no-" + flag[2:], flag)
    else:
        wanted, given_flag = f"{flag} {value}", flag
    raise ConfigError(f"{name}: --reference-defaults computes advantages as the reference does "
                      f"({wanted}), not with {given!r}; drop {given_flag} or --reference-defaults")
