"""Rollouts on the simulated phone: N tasks x G rollouts per task, recorded into the lake.

This is the collection half of online RL (and what `elake demo` and `elake rollout` run):
every rollout of a task in one batch shares a `group_id` (the GRPO/GiGPO episode group).
Work is split by group across worker processes, each with its own Recorder on the same
lake; keeping a whole group in one process keeps its anchor-key clustering consistent.

A policy is anything with `act(obs: Observation) -> str | Reply`. Learned policies read only
the goal, the screenshot and the history; scripted ones may read `obs.phone`, the simulator's
privileged state (the demo policy's oracle does). Each step is judged by the rule-based
step judge, so demo data carries step rewards and reasons like a PRM-judged rollout.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tqdm import tqdm

from episodelake.collectors.actions import parse_response
from episodelake.collectors.collect import Reply
from episodelake.collectors.recorder import Recorder
from episodelake.collectors.sim.judge import RuleJudge
from episodelake.collectors.sim.phone import Phone
from episodelake.collectors.sim.tasks import Task, get_task
from episodelake.lake import Lake

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Observation:
    task_id: str
    goal: str
    step: int
    screenshot: bytes
    history: tuple[str, ...]  # previous responses, oldest first, at most history_length
    phone: Phone  # privileged simulator state: for scripted policies only


class Policy(Protocol):
    def act(self, obs: Observation) -> str | Reply: ...


#: Builds the policy for one rollout: (task, seed) -> policy. Must be picklable when
#: workers > 1 (a top-level function, class or functools.partial of one).
PolicyFactory = Callable[[Task, int], Policy]


@dataclass(frozen=True)
class RolloutSpec:
    task_ids: tuple[str, ...]
    group_size: int = 8
    max_steps: int = 15
    history_length: int = 3
    run_id: str = ""
    policy_version: str = "0"
    model_name: str = "demo-policy"
    seed: int = 0
    batch: str = "b0"  # part of each group_id: one group per task per batch
    #: The recorder's image checks. "structure" skips decoding the screenshots the sim has
    #: just rendered, a fifth of a step's time; their perceptual hash is then not stored
    #: (the sim's anchor keys come from UI trees either way).
    image_checks: str = "decode"

    def __post_init__(self):
        if not self.task_ids:
            raise ValueError("task_ids is empty: give at least one task")
        if self.group_size < 1 or self.max_steps < 1 or self.history_length < 0:
            raise ValueError("group_size and max_steps must be >= 1, history_length >= 0")


@dataclass
class EpisodeResult:
    episode_id: str
    task_id: str
    group_id: str
    success: bool
    steps: int
    status: str


@dataclass
class RolloutReport:
    run_id: str
    episodes: list[EpisodeResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def steps(self) -> int:
        return sum(e.steps for e in self.episodes)

    @property
    def success_rate(self) -> float:
        return sum(e.success for e in self.episodes) / len(self.episodes) if self.episodes else 0.0

    def summary(self) -> str:
        return (f"run {self.run_id}: {len(self.episodes)} episodes, {self.steps} steps, "
                f"success {self.success_rate:.1%}, {self.steps / max(self.seconds, 1e-9):.1f} steps/s")


def group_id_for(spec: RolloutSpec, task_id: str) -> str:
    """A stable, id-safe group id for (run, batch, task)."""
    return f"{spec.run_id}.{spec.batch}.{uuid.uuid5(uuid.NAMESPACE_URL, task_id).hex[:12]}"


def run_episode(recorder: Recorder, task: Task, policy: Policy, spec: RolloutSpec, group_id: str,
                seed: int, judge: RuleJudge) -> EpisodeResult:
    """Play one episode on a fresh phone and record every step."""
    phone = Phone(seed)
    task.setup(phone)
    history: list[str] = []
    with recorder.start_episode(task.id, task.goal, group_id=group_id,
                                extra={"seed": seed, "difficulty": task.difficulty}) as ep:
        for step in range(spec.max_steps):
            screenshot = phone.screenshot()
            tree = phone.ui_tree()  # the anchor key: exact, unlike a perceptual hash
            obs = Observation(task.id, task.goal, step, screenshot,
                              tuple(history[-spec.history_length:]) if spec.history_length else (), phone)
            reply = policy.act(obs)
            reply = reply if isinstance(reply, Reply) else Reply(reply)
            parsed = parse_response(reply.response)
            before = phone.snapshot()
            outcome = phone.step(parsed.action if parsed.valid else {})
            score, reason = judge.judge(task, before, parsed.action if parsed.valid else None, phone.snapshot())
            done = outcome.done or step == spec.max_steps - 1
            info = {**(reply.info or {}), "result": outcome.result}
            if not outcome.valid:
                info["env_error"] = outcome.reason
            ep.log_step(screenshot, reply.response, reward=float(task.check(phone)) if done else 0.0,
                        step_reward=float(score), step_reward_reason=reason, prompt=reply.prompt,
                        info=info, ui_tree=tree)
            history.append(reply.response)
            if outcome.done:
                break
        success = task.check(phone)
        row = ep.finish(success=success, eval_score=float(success),
                        eval_reason="goal state reached" if success else f"goal not reached ({phone.screen_id()})")
    return EpisodeResult(ep.episode_id, task.id, group_id, success, row["episode_length"], row["status"])


def _run_group(args: tuple) -> list[EpisodeResult]:
    """All rollouts of one task's group, in one process with one recorder (closed at the end)."""
    lake_path, spec, task_id, factory, group_seed = args
    task = get_task(task_id)
    group_id = group_id_for(spec, task_id)
    judge = RuleJudge()
    with Recorder(Lake(lake_path), run_id=spec.run_id, policy_version=spec.policy_version,
                  env="sim", device="sim-phone", model_name=spec.model_name,
                  image_checks=spec.image_checks) as recorder:
        return [run_episode(recorder, task, factory(task, group_seed * 1000 + k), spec, group_id,
                            group_seed * 1000 + k, judge)
                for k in range(spec.group_size)]


def run_rollouts(lake: Lake | Path | str, spec: RolloutSpec, factory: PolicyFactory, *,
                 workers: int = 1, progress: bool = True) -> RolloutReport:
    """Run every group of `spec` and return what was recorded (flushed when this returns)."""
    lake_path = str(lake.path if isinstance(lake, Lake) else Path(lake))
    Lake(lake_path)  # create the tables once, before workers race to
    jobs = [(lake_path, spec, task_id, factory, spec.seed * 100_003 + i) for i, task_id in enumerate(spec.task_ids)]
    report = RolloutReport(spec.run_id)
    started = time.perf_counter()
    bar = tqdm(total=len(jobs) * spec.group_size, desc="rollouts", unit="episode", disable=not progress)
    try:
        if workers <= 1:
            for job in jobs:
                results = _run_group(job)
                report.episodes += results
                bar.update(len(results))
        else:
            with mp.get_context("spawn").Pool(workers) as pool:  # Lance is not fork-safe
                for results in pool.imap_unordered(_run_group, jobs):
                    report.episodes += results
                    bar.update(len(results))
    finally:
        bar.close()
    report.seconds = time.perf_counter() - started
    if isinstance(lake, Lake):
        lake.invalidate()
    return report


NOISE_LEVELS = ("none", "light", "demo")


def demo_policy_factory(noise_name: str = "demo") -> PolicyFactory:
    """The scripted demo policy with a named noise mix: "none" is the oracle itself, "demo"
    fails a realistic share of episodes with every mistake kind, "light" half as often."""
    from functools import partial

    if noise_name not in NOISE_LEVELS:
        raise ValueError(f"noise must be one of {NOISE_LEVELS}, not {noise_name!r}")
    return partial(_make_demo_policy, noise_name)


def _make_demo_policy(noise_name: str, task: Task, seed: int) -> Policy:
    from dataclasses import replace

    from episodelake.collectors.sim.policy import DemoPolicy, NoiseConfig

    demo = NoiseConfig.demo()
    noise = {"none": NoiseConfig(), "demo": demo,
             "light": replace(demo, grounding=demo.grounding / 2, planning=demo.planning / 2,
                              premature_terminate=demo.premature_terminate / 2, loop=demo.loop / 2)}[noise_name]
    return _DemoAgent(DemoPolicy(task, noise, seed))


class _DemoAgent:
    """Adapts the demo policy (which reads the phone) to the rollout Policy protocol."""

    def __init__(self, policy):
        self.policy = policy

    def act(self, obs: Observation) -> Reply:
        decision = self.policy.decide(obs.phone)
        return Reply(decision.response, info={"noise": decision.noise} if decision.noise else None)


def task_ids(tasks: Sequence[str] | int, seed: int = 0) -> tuple[str, ...]:
    """Explicit task ids, or `n` tasks sampled from the registry."""
    from episodelake.collectors.sim.tasks import sample_tasks

    if isinstance(tasks, int):
        return tuple(t.id for t in sample_tasks(tasks, seed))
    return tuple(get_task(t).id for t in tasks)
