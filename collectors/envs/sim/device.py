"""The simulated phone (:mod:`episodelake.collectors.envs.sim`) as a `Device`, with its tasks.

Task names are the sim registry's task ids (``wifi_on``,
``notes_create[title=Groceries,body=milk]``). Every episode starts from a fresh phone built
from the task's seed (or the device's own), so the episodes of one group start from the same
screen, as a GRPO group does on a reset emulator. Evaluation checks the task's goal on the
phone's internal state.

The phone's internal state is privileged: agents never see it in their observation. Two
things read it through this device instead of through a loop of their own:
:class:`~episodelake.collectors.agents.oracle.OraclePolicy` (the registry's oracle with
optional mistakes, the demo policy) and :class:`SimJudge` (the rule-based step judge, a
step-judge hook of the episode loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from episodelake.collectors.envs.base import (
    ActionResult,
    Collection,
    Device,
    DeviceKind,
    DeviceOption,
    Evaluation,
    RerunDevice,
    RerunTarget,
    Screen,
    StepScore,
    Task,
)
from episodelake.collectors.envs.sim import tasks as sim_tasks
from episodelake.collectors.envs.sim.geometry import HEIGHT, WIDTH
from episodelake.collectors.envs.sim.judge import RuleJudge
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import PhoneState
from episodelake.lake.storage.errors import ActionFailed, DeviceError, InvalidInput, NotFound
from episodelake.lake.vocab.families import ParsedAction

if TYPE_CHECKING:  # the server (FastAPI) loads only for `elake serve-env`
    from episodelake.collectors.envs.server import TaskInfo


class SimDevice(Device):
    env = "sim"

    def __init__(self, seed: int = 0, *, name: str = "sim-0", with_ui_tree: bool = True):
        self.seed = seed
        self._name = name
        self.with_ui_tree = with_ui_tree
        self.phone = Phone(seed)
        self.task: sim_tasks.Task | None = None

    @property
    def name(self) -> str:
        return self._name

    def screen(self) -> Screen:
        # the phone's logical pixels, which agents' coordinates map onto (screenshots are
        # rendered at half that size; points travel as fractions, so both agree)
        return Screen(WIDTH, HEIGHT)

    def screenshot(self) -> bytes:
        return self.phone.screenshot()

    def ui_tree(self) -> str | None:
        return self.phone.ui_tree() if self.with_ui_tree else None

    def execute(self, action: ParsedAction) -> ActionResult:
        outcome = self.phone.step(action.action)
        if not outcome.valid:
            raise ActionFailed(f"the phone did nothing: {outcome.reason}")
        return ActionResult(outcome.result)

    def start_task(self, task: Task) -> str:
        try:
            sim_task = sim_tasks.get_task(task.name)
        except NotFound as exc:
            raise DeviceError(f"{exc}; `elake serve-env --list-tasks` lists them") from None
        self.phone = Phone(self.seed if task.seed is None else task.seed)
        sim_task.setup(self.phone)
        self.task = sim_task
        return task.goal or sim_task.goal

    def episode_extra(self, task: Task) -> dict[str, Any]:
        # the seed replays the episode; the difficulty groups results without the registry
        difficulty = self.task.difficulty if self.task is not None else None
        return {"seed": self.phone.seed, "difficulty": difficulty}

    def evaluate(self, task: Task) -> Evaluation:
        if self.task is None or self.task.id != task.name:
            raise DeviceError(f"task {task.name!r} is not running on {self.name}")
        if self.task.check(self.phone):
            return Evaluation(1.0, "the goal holds on the phone")
        return Evaluation(0.0, "the goal does not hold on the phone")

    def end_task(self, task: Task) -> None:
        self.task = None


class SimJudge:
    """The rule-based step judge (:class:`~episodelake.collectors.envs.sim.judge.RuleJudge`) as
    the episode loop's step-judge hook: step reward 1 when a step brings the phone closer
    to the goal, and the task's success (1 or 0) as the environment reward of the final
    step, 0 before it. Its distance memo lives as long as the judge, so a worker keeps one
    for all its episodes."""

    def __init__(self) -> None:
        self.rules = RuleJudge()

    def before(self, device: Device) -> PhoneState:
        return _sim(device).phone.snapshot()

    def score(self, device: Device, before: PhoneState, action: ParsedAction,
              final: bool) -> StepScore:
        device = _sim(device)
        task = device.task
        if task is None:
            raise DeviceError("no task is running: the rule judge needs one (start_task)")
        score, reason = self.rules.judge(task, before, action.action if action.valid else None,
                                         device.phone.snapshot())
        reward = float(task.check(device.phone)) if final else 0.0
        return StepScore(float(score), reason, reward)


def _sim(device: Device) -> SimDevice:
    if not isinstance(device, SimDevice):
        raise InvalidInput("the rule judge scores only the simulated phone (--sim)")
    return device


def task_infos() -> list[TaskInfo]:
    """The registry as the environment server lists it (tags: difficulty, template)."""
    from episodelake.collectors.envs.server import TaskInfo

    return [TaskInfo(t.id, t.goal, [t.difficulty, t.name]) for t in sim_tasks.all_tasks()]


# --- the device kind: `elake collect sim`, `elake rerun --env sim` -----------------------------

@dataclass(frozen=True)
class SimSpec:
    """A simulated phone, built where the worker runs."""

    seed: int = 0
    name: str = "sim-0"
    with_ui_tree: bool = True

    def open(self) -> Device:
        return SimDevice(self.seed, name=self.name, with_ui_tree=self.with_ui_tree)


def _collection(values: dict[str, Any]) -> Collection:
    seed, sample = values["seed"], values["sample"]
    sampled = tuple(t.id for t in sim_tasks.sample_tasks(sample, seed)) if sample else ()
    return Collection([SimSpec(seed, f"sim-{i}") for i in range(values["workers"])], tasks=sampled)


def _rerun_spec(target: RerunTarget) -> SimSpec:
    return SimSpec(target.seed, name=f"sim-{target.seed}")


def _unknown_tasks(names: Sequence[str]) -> list[str]:
    unknown = []
    for name in names:
        try:
            sim_tasks.get_task(name)
        except NotFound:
            unknown.append(name)
    return unknown


DEVICE = DeviceKind(
    name="sim", summary="the simulated phone, in this process", doc=__doc__,
    description="Run tasks of the simulated phone's registry.",
    options=(
        DeviceOption("seed", int, "phone seed (default 0)", 0, show_default=False),
        DeviceOption("sample", int | None, "N tasks sampled from the registry", metavar="N"),
    ),
    task_help="a task id of the registry (repeatable)",
    collect=_collection,
    policies=("random", "oracle"),
    workers=True,
    rerun=RerunDevice(SimDevice.env, _rerun_spec, unknown_tasks=_unknown_tasks),
)
