"""Rollouts on the simulated phone: N tasks x G rollouts per task, recorded into the lake.

This is the collection half of online RL (and what `elake demo`, `elake rollout` and the
trainer run): every rollout of a task in one batch shares a `group_id` (the GRPO/GiGPO
episode group) and has a seed of its own, so a batch replays exactly. The episodes run in
the one episode loop (:func:`~episodelake.collectors.loop.run_episode`) through
:func:`~episodelake.collectors.jobs.batch.run_batch` with worker processes (the sim is
CPU-bound), a whole group per process so its anchor keys are clustered by one keyer.

Any agent plays (`act(Observation) -> Reply`, given as a spec opened in each worker): the
trainer's policy reads the goal, the screenshots and its history; the demo policy reads the
phone through the simulated device. Each step is judged by the rule-based step judge
(:class:`~episodelake.collectors.envs.sim.device.SimJudge`), so rollouts carry step rewards and
reasons like a PRM-judged rollout.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from episodelake.collectors.envs.base import Task
from episodelake.collectors.envs.sim.device import SimJudge, SimSpec
from episodelake.collectors.envs.sim.tasks import get_task
from episodelake.collectors.jobs.batch import AgentSpec, OracleSpec, RunSettings, run_batch
from episodelake.collectors.loop import EpisodeSummary
from episodelake.lake import Lake
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.seeds import derive

#: The episodes ``device`` of every rollout: the phone is rebuilt from each episode's seed,
#: so which worker ran an episode says nothing about it.
DEVICE_NAME = "sim-phone"


@dataclass(frozen=True)
class RolloutSpec:
    task_ids: tuple[str, ...]
    group_size: int = 8
    max_steps: int = 15
    run_id: str = ""
    policy_version: str = "0"
    seed: int = 0
    batch: str = "b0"  # part of each group_id: one group per task per batch
    #: The recorder's image checks. "structure" skips decoding the screenshots the sim has
    #: just rendered, a fifth of a step's time; their perceptual hash is then not stored
    #: (the sim's anchor keys come from UI trees either way).
    image_checks: str = "decode"

    def __post_init__(self):
        if not self.task_ids:
            raise InvalidInput("task_ids is empty: give at least one task")
        if self.group_size < 1 or self.max_steps < 1:
            raise InvalidInput("group_size and max_steps must be >= 1")


@dataclass
class RolloutReport:
    run_id: str
    episodes: list[EpisodeSummary] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def steps(self) -> int:
        return sum(e.steps for e in self.episodes)

    @property
    def success_rate(self) -> float:
        return sum(bool(e.success) for e in self.episodes) / len(self.episodes) if self.episodes else 0.0

    def summary(self) -> str:
        return (f"run {self.run_id}: {len(self.episodes)} episodes, {self.steps} steps, "
                f"success {self.success_rate:.1%}, {self.steps / max(self.seconds, 1e-9):.1f} steps/s")


def group_id_for(spec: RolloutSpec, task_id: str) -> str:
    """A stable, id-safe group id for (run, batch, task)."""
    return f"{spec.run_id}.{spec.batch}.{uuid.uuid5(uuid.NAMESPACE_URL, task_id).hex[:12]}"


def rollout_tasks(spec: RolloutSpec) -> list[Task]:
    """One Task per rollout: each group under its group id, each rollout with its own seed
    (the phone's start state and the agent's random stream)."""
    tasks: list[Task] = []
    for index, task_id in enumerate(spec.task_ids):
        group_id = group_id_for(spec, task_id)
        tasks += [Task(task_id, group_id=group_id, seed=derive(spec.seed, "rollout", index, k))
                  for k in range(spec.group_size)]
    return tasks


def run_rollouts(lake: Lake | Path | str, spec: RolloutSpec, agent: AgentSpec, *,
                 workers: int = 1, progress: bool = True, backend: str = "process",
                 ray_address: str | None = None, tasks: Sequence[Task] | None = None) -> RolloutReport:
    """Run every group of `spec` with `agent` and return what was recorded (flushed when
    this returns). `backend` "ray" runs the workers as Ray actors (on the cluster at
    `ray_address`, else one started here), each writing to the lake itself. `tasks` runs
    these tasks (branches, say) with the spec's settings instead of its groups."""
    settings = RunSettings(spec.run_id, max_steps=spec.max_steps,
                           policy_version=spec.policy_version, image_checks=spec.image_checks,
                           judge=SimJudge)
    tasks = rollout_tasks(spec) if tasks is None else list(tasks)
    report = RolloutReport(spec.run_id)
    started = time.perf_counter()
    with tqdm(total=len(tasks), desc="rollouts", unit="episode", disable=not progress) as bar:
        batch = run_batch(lake, [(SimSpec(name=DEVICE_NAME), agent)] * max(workers, 1), tasks,
                          settings, backend=backend, ray_address=ray_address,
                          on_episode=lambda _: bar.update())
    report.episodes = batch.episodes
    report.seconds = time.perf_counter() - started
    return report


NOISE_LEVELS = ("none", "light", "demo")


def demo_agent(noise_name: str = "demo") -> OracleSpec:
    """The scripted demo policy with a named noise mix: "none" is the oracle itself, "demo"
    fails a realistic share of episodes with every mistake kind, "light" half as often."""
    from dataclasses import replace

    from episodelake.collectors.agents.oracle import NoiseConfig

    if noise_name not in NOISE_LEVELS:
        raise InvalidInput(f"noise must be one of {NOISE_LEVELS}, not {noise_name!r}")
    demo = NoiseConfig.demo()
    noise = {"none": NoiseConfig(), "demo": demo,
             "light": replace(demo, grounding=demo.grounding / 2, planning=demo.planning / 2,
                              premature_terminate=demo.premature_terminate / 2,
                              loop=demo.loop / 2)}[noise_name]
    return OracleSpec(noise)


def task_ids(tasks: Sequence[str] | int, seed: int = 0) -> tuple[str, ...]:
    """Explicit task ids, or `n` tasks sampled from the registry."""
    from episodelake.collectors.envs.sim.tasks import sample_tasks

    if isinstance(tasks, int):
        return tuple(t.id for t in sample_tasks(tasks, seed))
    return tuple(get_task(t).id for t in tasks)
