"""The online loop: sample -> rollout -> advantages -> update -> evaluate -> checkpoint.

:func:`train` reads top to bottom, one phase per function below it. Each iteration:

1. samples `tasks` training tasks (seeded by the run's seed and the iteration);
2. runs `group_size` rollouts of each on the simulated phone with the current weights,
   recorded into the lake (run_id, policy_version = the iteration, one group_id per task);
   with ``--branch failing``, `group_size - branch_n` of them, then `branch_n` branches of
   each group's failed episodes at their failing steps (same budget: `group_size` episodes
   per group; :func:`rollout_iteration`);
3. computes the advantages of those episodes' steps with one SQL query
   (:func:`episodelake.trainer.advantages.compute_advantages`) and joins them back to the
   recorded steps (goal, screenshot, earlier responses, the response);
4. updates the policy with the PPO-clip loss on the log-probabilities of the recorded
   responses (the actions the policy took);
5. evaluates the updated policy on held-out tasks (their own run id, ``<run_id>.eval``);
6. writes the iteration's metrics into the lake's ``runs`` table and a checkpoint.

With ``--sft-warmup-steps`` (``--policy vlm``), supervised steps on lake data read with
`episodelake.trainer.data.sft_dataset` come before iteration 0 (:mod:`episodelake.trainer.warmup`).

A run is resumed from its last checkpoint (``--resume``): iterations already done are not
repeated, and the stored config must match except for what `RESUMABLE` allows to change.
Held-out tasks are unseen parameter values of the training templates (``open_app`` for an
app never opened in training, ``airplane_mode`` on when training saw off): per template with
two or more tasks, a `holdout` share of them, chosen by the seed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import torch
from tqdm import tqdm

from episodelake.collectors.envs.base import Task
from episodelake.collectors.envs.suites import get_suite
from episodelake.collectors.jobs.branch import failing_branches
from episodelake.collectors.jobs.rollout import (
    RolloutReport,
    RolloutSpec,
    group_id_for,
    run_rollouts,
)
from episodelake.lake import Lake
from episodelake.lake.derive.derivations import enrich_anchor_keys
from episodelake.lake.storage.layout import check_id, local_state
from episodelake.lake.vocab.seeds import derive
from episodelake.trainer import checkpoint
from episodelake.trainer import credit as credit_score
from episodelake.trainer import warmup as sft_warmup
from episodelake.trainer.advantages import AdvantageResult, compute_advantages
from episodelake.trainer.config import RESUMABLE, ConfigError, TrainConfig
from episodelake.trainer.engine import Engine, build_engine, deepspeed_usable
from episodelake.trainer.policies.base import Sample, TrainablePolicy
from episodelake.trainer.ppo import ppo_loss

log = logging.getLogger(__name__)

#: --target-kl stops the update once a minibatch's KL passes this multiple of the target.
KL_STOP = 1.5
#: Checkpoints live inside the lake folder unless --checkpoint-dir says otherwise.
CHECKPOINTS = "_checkpoints"


@dataclass
class TrainResult:
    run_id: str
    checkpoint_dir: Path
    metrics: list[dict[str, Any]] = field(default_factory=list)
    warmup: sft_warmup.WarmupResult | None = None


def train(config: TrainConfig, lake: Lake, *, progress: bool = True) -> TrainResult:
    """Run (or resume) the online loop until `config.iterations`; metrics go to `runs`."""
    run_id = check_id(config.run_id or _new_run_id(config), "run_id")
    # checkpoints are local files: in the lake folder, or this machine's folder for a remote lake
    root = Path(config.checkpoint_dir) if config.checkpoint_dir else local_state(lake.location) / CHECKPOINTS / run_id
    start, resumed = _resume_point(config, run_id, root)
    # the SFT warm-up's selection is resolved before the model loads: a bad one fails at once
    warm = sft_warmup.prepare(lake, config) if start == 0 else None
    if config.threads:
        torch.set_num_threads(config.threads)
    policy = build_policy(config, resumed / checkpoint.POLICY_DIR if resumed else None)
    assert config.lr is not None, "TrainConfig's validator fills lr"
    engine = build_engine(_engine_kind(config), policy.module, lr=config.lr,
                          max_grad_norm=config.max_grad_norm,
                          deepspeed_config=config.deepspeed_config)
    if resumed is not None:
        engine.load(resumed)
    reference = policy.reference() if config.kl_coef > 0 else None
    train_tasks, eval_tasks = split_tasks(config)
    result = TrainResult(run_id, root)
    log.info("run %s: iterations %d..%d, %d training and %d held-out tasks, engine %s",
             run_id, start, config.iterations - 1, len(train_tasks), len(eval_tasks), engine.name)
    if warm is not None:  # a resumed run's weights have had it
        result.warmup = sft_warmup.run(warm, lake, policy, engine, config, run_id=run_id,
                                       progress=progress)

    for iteration in range(start, config.iterations):
        timer = PhaseTimer()
        with timer("sample"):
            task_ids = sample_tasks(train_tasks, config, iteration)
        with timer("rollout"):
            report, branching = rollout_iteration(
                lake, policy, task_ids, config, run_id=run_id, version=str(iteration),
                batch=f"it{iteration}", seed=derive(config.seed, "rollout", iteration),
                progress=progress)
            generation = policy.stats()
        with timer("advantages"):
            batch = step_advantages(lake, report, config, policy.history_length)
        with timer("update"):
            update_stats = update(policy, engine, reference, batch.samples, config, iteration=iteration,
                                  seed=derive(config.seed, "update", iteration), progress=progress)
        with timer("evaluate"):
            evaluation = evaluate(lake, policy, eval_tasks, config, run_id=run_id,
                                  version=str(iteration + 1), iteration=iteration,
                                  progress=progress)
        with timer("checkpoint"):
            save_checkpoint(root, iteration, policy, engine, config, run_id)
        metrics = iteration_metrics(report, batch, update_stats, evaluation, generation, timer,
                                    branching)
        record_metrics(lake, run_id, iteration, config, metrics)
        result.metrics.append(metrics)
        log.info("run %s iteration %d: success %.1f%%, held-out %s, loss %.4f, %.0f s", run_id,
                 iteration, 100 * metrics["success_rate"],
                 "-" if evaluation is None else f"{100 * evaluation.success_rate:.1f}%",
                 update_stats.get("loss", float("nan")), sum(timer.seconds.values()))
    return result


# --- set-up ----------------------------------------------------------------------------------

def _new_run_id(config: TrainConfig) -> str:
    return f"train-{config.advantages.algo}-{config.policy}-{datetime.now(UTC):%Y%m%dT%H%M%S}"


def _resume_point(config: TrainConfig, run_id: str, root: Path) -> tuple[int, Path | None]:
    """(first iteration to run, the checkpoint to continue from) for this run."""
    folder = checkpoint.latest(root) if root.exists() else None
    if folder is None:
        if config.resume:
            raise ConfigError(f"resume: run {run_id} has no checkpoint under {root}; start it "
                              "without --resume")
        return 0, None
    if not config.resume:
        raise ConfigError(f"run_id: run {run_id} already has checkpoints in {root}; pass "
                          "--resume to continue it, or choose another --run-id")
    state = checkpoint.read_state(folder)
    stored = TrainConfig.from_json(json.dumps(state["config"]))
    before, now = stored.settings(), config.settings()
    changed = sorted(name for name in now if name not in RESUMABLE and before[name] != now[name])
    if changed:
        raise ConfigError(f"resume: run {run_id} was started with different {', '.join(changed)} "
                          f"(stored in {folder / checkpoint.STATE_FILE}); only "
                          f"{', '.join(sorted(RESUMABLE))} may change when resuming")
    log.info("resuming run %s after iteration %d from %s", run_id, state["iteration"], folder)
    return state["iteration"] + 1, folder


def build_policy(config: TrainConfig, weights: Path | None = None) -> TrainablePolicy:
    """The policy the config names: fresh, or with the weights of a checkpoint."""
    if config.policy == "tiny":
        from episodelake.trainer.policies.tiny import TinyConfig, TinyPolicy

        if weights is not None:
            return TinyPolicy.load(weights, seed=config.seed)
        return TinyPolicy(TinyConfig(seed=config.seed, apps=get_suite(config.env).apps))
    if config.policy == "screen":
        from episodelake.trainer.policies.screen import ScreenConfig, ScreenPolicy

        if weights is not None:
            return ScreenPolicy.load(weights, seed=config.seed)
        return ScreenPolicy(ScreenConfig(seed=config.seed, apps=get_suite(config.env).apps))
    from episodelake.trainer.policies.vlm import VLMPolicy

    assert config.model_path, "TrainConfig's validator requires model_path for vlm"
    return VLMPolicy(config.model_path, weights=weights, history_length=config.history_length,
                     max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                     max_pixels=config.max_pixels, dtype=config.dtype,
                     generation=config.generation, vllm_gpu_memory=config.vllm_gpu_memory)


def _engine_kind(config: TrainConfig) -> str:
    if config.engine != "auto":
        return config.engine
    return "deepspeed" if config.policy == "vlm" and deepspeed_usable() else "torch"


def split_tasks(config: TrainConfig) -> tuple[list[str], list[str]]:
    """(training task ids, held-out task ids) of the config's templates, or of its difficulty
    (module docstring). A template whose tasks carry their split (the long templates: held-out
    values never in a training task) keeps it, whatever `holdout` says."""
    chosen = set(config.templates.split(",")) if config.templates else None
    by_template: dict[str, list[str]] = {}
    fixed: dict[str, str] = {}
    for task in get_suite(config.env).tasks():
        if task.name in chosen if chosen is not None else config.difficulty in ("all", task.difficulty):
            by_template.setdefault(task.name, []).append(task.id)
            if task.split is not None:
                fixed[task.id] = task.split
    rng = random.Random(config.seed)
    train_ids: list[str] = []
    held_out: list[str] = []
    for name in sorted(by_template):
        ids = sorted(by_template[name])
        if any(task_id in fixed for task_id in ids):
            held_out += [task_id for task_id in ids if fixed.get(task_id) == "held_out"]
            train_ids += [task_id for task_id in ids if fixed.get(task_id) != "held_out"]
            continue
        rng.shuffle(ids)
        n = round(config.holdout * len(ids)) if len(ids) > 1 else 0
        held_out += ids[:n]
        train_ids += ids[n:]
    return train_ids, held_out


class PhaseTimer:
    """Wall-clock seconds per phase of an iteration, and this process's CPU seconds over all
    phases: on a shared machine the wall clock stretches with the neighbours' load, the CPU
    time of a one-thread run does not, so "minutes to a success rate" stays comparable."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu_seconds = 0.0

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        started, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.seconds[phase] = round(time.perf_counter() - started, 3)
            self.cpu_seconds = round(self.cpu_seconds + time.process_time() - cpu, 3)


# --- 1. sample -------------------------------------------------------------------------------

def sample_tasks(train_ids: list[str], config: TrainConfig, iteration: int) -> list[str]:
    """`config.tasks` training tasks for this iteration; distinct while there are enough."""
    if not train_ids:
        which = f"--templates {config.templates}" if config.templates else \
            f"--difficulty {config.difficulty}"
        raise ConfigError(f"holdout: no training tasks are left for {which} with --holdout "
                          f"{config.holdout}")
    rng = random.Random(derive(config.seed, "tasks", iteration))
    picked: list[str] = []
    while len(picked) < config.tasks:
        picked += rng.sample(train_ids, min(len(train_ids), config.tasks - len(picked)))
    return picked


# --- 2. rollout ------------------------------------------------------------------------------

def rollout(lake: Lake, policy: TrainablePolicy, task_ids: list[str], config: TrainConfig, *,
            run_id: str, version: str, batch: str, seed: int, progress: bool,
            group_size: int | None = None, tasks: list[Task] | None = None) -> RolloutReport:
    """`group_size` episodes of every task with the policy's current weights, recorded
    (through the same episode loop and batch runner as every other rollout); or, given
    `tasks` (branches, more rollouts of some groups), those with the same settings."""
    spec = rollout_spec(task_ids, config, run_id=run_id, version=version, batch=batch, seed=seed,
                        group_size=group_size)
    policy.module.eval()
    return run_rollouts(lake, spec, policy.agent(), workers=config.workers, progress=progress,
                        backend=config.rollout_backend, ray_address=config.ray_address, tasks=tasks)


def rollout_spec(task_ids: list[str], config: TrainConfig, *, run_id: str, version: str, batch: str,
                 seed: int, group_size: int | None = None) -> RolloutSpec:
    return RolloutSpec(
        task_ids=tuple(task_ids), group_size=group_size or config.group_size,
        max_steps=config.max_steps, run_id=run_id, policy_version=version, seed=seed,
        batch=batch, image_checks="structure")  # the sim rendered them; no need to decode them


def rollout_iteration(lake: Lake, policy: TrainablePolicy, task_ids: list[str], config: TrainConfig,
                      *, run_id: str, version: str, batch: str, seed: int,
                      progress: bool) -> tuple[RolloutReport, dict[str, int] | None]:
    """The iteration's rollouts, and what branching did (None without ``--branch``).

    With ``--branch failing`` each group plays `group_size - branch_n` fresh rollouts (the
    seeds the same run without branching gives them), then `branch_n` branches of its failed
    episodes, each at the step the judge first scored low (`failing_branches`: replayed
    there, then played by the policy); a group with nothing to branch plays its remaining
    `branch_n` rollouts fresh, with the seeds it would have had. Every group ends with
    `group_size` episodes, as without branching, unless a branch is refused (counted)."""
    if config.branch == "none":
        return rollout(lake, policy, task_ids, config, run_id=run_id, version=version,
                       batch=batch, seed=seed, progress=progress), None
    fresh = config.group_size - config.branch_n
    first = rollout(lake, policy, task_ids, config, run_id=run_id, version=version, batch=batch,
                    seed=seed, progress=progress, group_size=fresh)
    plan = failing_branches(lake, first.episodes, config.branch_n, derive(seed, "branch"))
    spec = rollout_spec(task_ids, config, run_id=run_id, version=version, batch=batch, seed=seed)
    without = set(plan.groups_without_failure)
    fill = [Task(task_id, group_id=group_id_for(spec, task_id), seed=derive(seed, "rollout", index, k))
            for index, task_id in enumerate(task_ids) if group_id_for(spec, task_id) in without
            for k in range(fresh, config.group_size)]
    second = rollout(lake, policy, task_ids, config, run_id=run_id, version=version, batch=batch,
                     seed=seed, progress=progress, tasks=plan.tasks + fill)
    report = RolloutReport(run_id, first.episodes + second.episodes, first.seconds + second.seconds)
    branches = [e for e in second.episodes if e.branch_of is not None]
    recorded = [e for e in branches if e.status != "skipped"]
    return report, {"planned": len(plan.tasks), "recorded": len(recorded),
                    "refused": len(branches) - len(recorded), "fresh_instead": len(fill),
                    "groups_without_failure": len(without), "unbranched": len(plan.unbranched),
                    "replayed_steps": sum(e.branch_step or 0 for e in recorded)}


# --- 3. advantages ---------------------------------------------------------------------------

_SAMPLES_SQL = """
WITH batch_steps AS (
    SELECT s.episode_id, s.step, s.image, s.model_response, s.info, s.ocr_boxes,
           coalesce(list(s.model_response) OVER earlier, []) AS history
           {history_images}
    FROM steps s
    WINDOW earlier AS (PARTITION BY s.episode_id ORDER BY s.step
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           shown AS (PARTITION BY s.episode_id ORDER BY s.step
                     ROWS BETWEEN {shown} PRECEDING AND 1 PRECEDING)
)
SELECT b.*, e.task_goal AS goal, a.advantage
FROM batch_steps b
JOIN advantages a ON a.episode_id = b.episode_id AND a.step = b.step
JOIN episodes e ON e.episode_id = b.episode_id
ORDER BY b.episode_id, b.step
"""


@dataclass
class LearningBatch:
    """One iteration's advantages, the steps to learn from, and how well the advantages
    agree with the judge's step marks (None when the run learns from outcomes only)."""

    advantages: AdvantageResult
    samples: list[Sample]
    credit: credit_score.Credit | None


def step_advantages(lake: Lake, report: RolloutReport, config: TrainConfig,
                    history_length: int) -> LearningBatch:
    """The batch's advantages (SQL over the batch's rows) and the steps to learn from. Steps
    whose anchor key a recorder left to its background worker are keyed first (the same key
    it would give; steps keyed by a UI tree, as the sim's are, cost nothing)."""
    ids = [e.episode_id for e in report.episodes if e.episode_id is not None]  # a skipped task has none
    enrich_anchor_keys(lake, ids, workers=config.workers)
    episodes, steps_table = lake.episode_batch(ids, images=True)
    con = duckdb.connect()
    try:
        con.register("episodes", episodes)
        con.register("steps", steps_table)
        steps = "steps"
        if not config.step_rewards:  # learn from the task's outcome only
            con.execute("CREATE TEMP VIEW outcome_steps AS "
                        "SELECT * REPLACE (NULL::DOUBLE AS step_reward) FROM steps")
            steps = "outcome_steps"
        result = compute_advantages(con, config.advantages, steps=steps, episodes="episodes")
        con.register("advantages", result.table)
        images = (", coalesce(list(s.image) OVER shown, []) AS history_images"
                  if history_length else "")
        rows = con.sql(_SAMPLES_SQL.format(history_images=images,
                                           shown=max(history_length, 1))).to_arrow_table()
    finally:
        con.close()
    samples = [
        Sample(episode_id=row["episode_id"], step=row["step"], goal=row["goal"],
               screenshot=row["image"], history=tuple(row["history"]),
               history_images=tuple(row.get("history_images") or ()),
               response=row["model_response"] or "", advantage=row["advantage"],
               info=json.loads(row["info"]) if row["info"] else None,
               ocr_boxes=tuple(row["ocr_boxes"] or ()))
        for row in rows.to_pylist()
    ]
    # Not in episode-id order: ids are random, and the update's minibatches are drawn by
    # position, so sorting by id made the same seed train a different policy each run. By group
    # id (derived from the run, batch and task), then rollout order inside the group (one worker
    # plays a group in order), whichever worker finished first.
    order = sorted(range(len(report.episodes)),
                   key=lambda k: (report.episodes[k].group_id or "", k))
    rank = {report.episodes[k].episode_id: position for position, k in enumerate(order)}
    samples.sort(key=lambda sample: (rank[sample.episode_id], sample.step))
    credit = (credit_score.score_advantages(result.table, episodes, steps_table)
              if config.step_rewards else None)
    return LearningBatch(result, samples, credit)


# --- 4. update -------------------------------------------------------------------------------

def update(policy: TrainablePolicy, engine: Engine, reference: TrainablePolicy | None,
           samples: list[Sample], config: TrainConfig, *, iteration: int, seed: int,
           progress: bool) -> dict[str, float]:
    """PPO epochs over the batch; returns the token-weighted means of the loss terms.

    With --target-kl the epochs stop after the first minibatch whose approximate KL to the
    rollout policy (the k3 estimate, measured before its step) passes `KL_STOP` times the target, as
    Stable-Baselines3's PPO does: later minibatches would push the policy further from the
    one whose samples they are."""
    if not samples:
        return {"samples": 0, "samples_scored": 0, "tokens": 0, "epochs": 0,
                "optimizer_steps": 0}
    assert config.entropy_coef is not None, "TrainConfig's validator fills entropy_coef"
    prepared = policy.prepare(samples)
    advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
    policy.module.train()
    old = _token_rows(policy, prepared, config.micro_batch_size)
    ref = _token_rows(reference, reference.prepare(samples), config.micro_batch_size) \
        if reference is not None else None
    tokens = torch.tensor([len(row) for row in old], dtype=torch.float32)
    scored = torch.nonzero(tokens > 0)[:, 0]
    totals: dict[str, float] = {}
    weight = 0.0
    generator = torch.Generator().manual_seed(seed)
    minibatches = max(1, len(scored) // config.minibatch_size)
    engine.set_lr(learning_rate(config, iteration))
    bar = tqdm(total=config.ppo_epochs * minibatches, desc="update", unit="minibatch",
               disable=not progress or not len(scored))
    steps = 0
    stopped = False
    for _ in range(config.ppo_epochs if len(scored) else 0):
        order = scored[torch.randperm(len(scored), generator=generator)]
        for minibatch in torch.tensor_split(order, minibatches):
            minibatch_tokens = float(tokens[minibatch].sum())
            kl = 0.0
            for micro in torch.split(minibatch, config.micro_batch_size):
                share = float(tokens[micro].sum()) / minibatch_tokens
                current = policy.score([prepared[i] for i in micro])
                width = current.logp.shape[1]
                loss, stats = ppo_loss(
                    current, _pad([old[i] for i in micro], width),
                    advantages[micro].to(current.logp.device), clip_eps=config.clip_eps,
                    clip_eps_high=config.clip_eps_high,
                    ref_logp=_pad([ref[i] for i in micro], width) if ref is not None else None,
                    kl_coef=config.kl_coef, entropy_coef=config.entropy_coef)
                engine.backward(loss * share)
                kl += stats["kl_old"] * share
                for name, value in stats.items():
                    totals[name] = totals.get(name, 0.0) + value * float(tokens[micro].sum())
                weight += float(tokens[micro].sum())
            engine.step()
            steps += 1
            bar.update()
            # the policy has moved as far from the one that played as this batch can vouch for
            stopped = config.target_kl is not None and kl > KL_STOP * config.target_kl
            if stopped:
                break
        if stopped:
            break
    bar.close()
    policy.module.eval()
    means = {name: value / weight for name, value in totals.items()} if weight else {}
    return {**means, "samples": len(samples), "samples_scored": int(len(scored)),
            "tokens": int(tokens.sum()), "epochs": steps / minibatches if len(scored) else 0,
            "optimizer_steps": steps, "stopped_early": stopped,
            "lr": learning_rate(config, iteration)}


def learning_rate(config: TrainConfig, iteration: int) -> float:
    """--lr, falling linearly to --lr-decay-to of it at the last iteration (constant at 1)."""
    assert config.lr is not None, "TrainConfig's validator fills lr"
    progress = iteration / max(config.iterations - 1, 1)
    return config.lr * (1.0 - (1.0 - config.lr_decay_to) * min(progress, 1.0))


def _token_rows(policy: TrainablePolicy, prepared: list[Any], micro: int) -> list[torch.Tensor]:
    """Each sample's per-token log-probs under `policy` as it is now (no gradients)."""
    rows: list[torch.Tensor] = []
    with torch.no_grad():
        for start in range(0, len(prepared), micro):
            scored = policy.score(prepared[start:start + micro])
            for logp, mask in zip(scored.logp, scored.mask, strict=True):
                rows.append(logp[:int(mask.sum())].detach())
    return rows


def _pad(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    return torch.stack([torch.nn.functional.pad(row, (0, width - len(row))) for row in rows])


# --- 5. evaluate -----------------------------------------------------------------------------

def evaluate(lake: Lake, policy: TrainablePolicy, eval_tasks: list[str], config: TrainConfig, *,
             run_id: str, version: str, iteration: int, progress: bool) -> RolloutReport | None:
    """`eval_repeats` episodes of every held-out task, on the same phones every iteration."""
    if not config.eval_repeats or not eval_tasks:
        return None
    return rollout(lake, policy, eval_tasks, config, run_id=f"{run_id}.eval", version=version,
                   batch=f"eval{iteration}", seed=config.seed, progress=progress,
                   group_size=config.eval_repeats)


# --- 6. metrics and checkpoint ---------------------------------------------------------------

def iteration_metrics(report: RolloutReport, batch: LearningBatch,
                      update_stats: dict[str, float], evaluation: RolloutReport | None,
                      generation: dict[str, float], timer: PhaseTimer,
                      branching: dict[str, int] | None = None) -> dict[str, Any]:
    advantages = batch.advantages
    rewards = advantages.table.group_by("episode_id").aggregate([("reward", "sum")])
    anchor_sizes = advantages.anchor_group_sizes.to_pylist()
    groups = sum(row["anchor_groups"] for row in anchor_sizes)
    return {
        "episodes": len(report.episodes),
        "steps": report.steps,
        "success_rate": report.success_rate,
        "mean_episode_reward": (sum(rewards["reward_sum"].to_pylist()) / rewards.num_rows
                                if rewards.num_rows else 0.0),
        "mean_episode_length": report.steps / max(len(report.episodes), 1),
        "rollout_steps_per_second": report.steps / max(report.seconds, 1e-9),
        "eval_success_rate": None if evaluation is None else evaluation.success_rate,
        "eval_episodes": 0 if evaluation is None else len(evaluation.episodes),
        "advantages": advantages.stats,
        # a paid step's advantage above an unpaid one's (trainer/credit.py; 0.5 = no credit)
        "credit": None if batch.credit is None else dataclasses.asdict(batch.credit),
        "anchor_group_sizes": {str(row["anchor_group_size"]): row["steps"]
                               for row in anchor_sizes},
        # the share of GiGPO's step groups (anchor states) with two or more members
        "shared_anchor_groups": (sum(row["anchor_groups"] for row in anchor_sizes
                                     if row["anchor_group_size"] >= 2) / groups if groups else 0.0),
        "branching": branching,
        "update": update_stats,
        "update_tokens_per_second": (update_stats["tokens"] * update_stats["epochs"]
                                     / max(timer.seconds["update"], 1e-9)),
        "generation": generation,
        "seconds": dict(timer.seconds),
        "cpu_seconds": timer.cpu_seconds,
    }


def save_checkpoint(root: Path, iteration: int, policy: TrainablePolicy, engine: Engine,
                    config: TrainConfig, run_id: str) -> Path:
    folder = checkpoint.iteration_folder(root, iteration)
    folder.mkdir(parents=True, exist_ok=True)
    policy.save(folder / checkpoint.POLICY_DIR)
    engine.save(folder)
    checkpoint.commit(root, folder, {"iteration": iteration, "run_id": run_id,
                                     "config": json.loads(config.to_json())})
    return folder


def record_metrics(lake: Lake, run_id: str, iteration: int, config: TrainConfig,
                   metrics: dict[str, Any]) -> None:
    lake.upsert("runs", [{"run_id": run_id, "iteration": iteration, "kind": "train",
                          "config": config.to_json(), "metrics": json.dumps(metrics),
                          "created_at": datetime.now(UTC)}])
