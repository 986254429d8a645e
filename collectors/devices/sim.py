"""The simulated phone (:mod:`episodelake.collectors.sim`) as a `Device`, with its tasks.

Task names are the sim registry's task ids (``wifi_on``,
``notes_create[title=Groceries,body=milk]``). Every episode starts from a fresh phone built
from the same seed, so the episodes of one group start from the same screen, as a GRPO group
does on a reset emulator. Evaluation checks the task's goal on the phone's internal state.

:class:`OraclePolicy` plays the sim's demo policy (the registry's oracle, with optional
mistakes) on this device, for tests and demos that need episodes without a model.
"""

from __future__ import annotations

from episodelake.collectors.actions import ParsedAction
from episodelake.collectors.collect import Observation, Reply
from episodelake.collectors.devices.base import (
    ActionFailed,
    ActionResult,
    Device,
    DeviceError,
    Evaluation,
    Screen,
    Task,
)
from episodelake.collectors.envserver import TaskInfo
from episodelake.collectors.sim import tasks as sim_tasks
from episodelake.collectors.sim.geometry import HEIGHT, WIDTH
from episodelake.collectors.sim.phone import Phone
from episodelake.collectors.sim.policy import DemoPolicy, NoiseConfig


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
        except KeyError as exc:
            raise DeviceError(f"{exc.args[0]}; `elake serve-env --list-tasks` lists them") from None
        self.phone = Phone(self.seed)
        sim_task.setup(self.phone)
        self.task = sim_task
        return task.goal or sim_task.goal

    def evaluate(self, task: Task) -> Evaluation:
        if self.task is None or self.task.id != task.name:
            raise DeviceError(f"task {task.name!r} is not running on {self.name}")
        if self.task.check(self.phone):
            return Evaluation(1.0, "the goal holds on the phone")
        return Evaluation(0.0, "the goal does not hold on the phone")

    def end_task(self, task: Task) -> None:
        self.task = None


class OraclePolicy:
    """The sim's demo policy on `device`: the registry's oracle, plus the mistakes of
    `noise` (none by default), answering in MAI-UI text. Each step's `info` names the
    mistake behind it, if any."""

    history_length = 0

    def __init__(self, device: SimDevice, noise: NoiseConfig | None = None, seed: int = 0):
        self.device = device
        self.noise = noise or NoiseConfig()
        self.seed = seed
        self.name = "oracle" if self.noise == NoiseConfig() else "demo-policy"
        self._policy: DemoPolicy | None = None
        self._episodes = 0

    def act(self, observation: Observation) -> Reply:
        task = self.device.task
        if task is None:
            raise DeviceError("no task is running: the oracle needs one (start_task)")
        if observation.step == 0 or self._policy is None or self._policy.task is not task:
            self._episodes += 1  # a fresh random stream per episode, reproducible from the seed
            self._policy = DemoPolicy(task, self.noise, seed=self.seed * 100_003 + self._episodes)
        decision = self._policy.decide(self.device.phone)
        return Reply(decision.response, info={"noise": decision.noise} if decision.noise else None)


def task_infos() -> list[TaskInfo]:
    """The registry as the environment server lists it (tags: difficulty, template)."""
    return [TaskInfo(t.id, t.goal, [t.difficulty, t.name]) for t in sim_tasks.all_tasks()]
