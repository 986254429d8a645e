"""The `Device` interface: what the collection loop needs from a phone, whatever drives it.

A device shows a screen (`screenshot`, optionally `ui_tree`), reports its size and rotation
(`screen`), and carries out one parsed action at a time (`execute`). Task lifecycle
(`start_task`, `evaluate`, `end_task`) has defaults for devices that know no tasks (a real
phone only has the goal the user typed); environments with a task registry (the simulated
phone, a MobileWorld server) override them.

Actions arrive as :class:`~episodelake.lake.vocab.families.ParsedAction`, the same record the
steps table stores: points are fractions of the screenshot (``x``, ``y``, ``x2``, ``y2``), so
every implementation converts with its own real screen size instead of assuming 1080x2400 as
the reference framework does.

Devices fail with the product's device errors (`episodelake.lake.storage.errors.DeviceError` and its
kinds `DeviceUnavailable`, `EnvironmentLost`, `ActionFailed`, which say what the loop does
next); they are siblings of the lake's storage errors, never `LakeError`s.

An environment may also have a step judge (:class:`StepJudge`, e.g. the simulated phone's
rule judge): it scores each step from state the agent never sees, read through the device,
as :class:`Evaluation` scores the whole episode.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from episodelake.lake.storage.errors import DeviceUnavailable, InvalidInput
from episodelake.lake.vocab.families import ParsedAction


@dataclass(frozen=True)
class Screen:
    """The screen as the agent sees it: pixel size in the current orientation, rotation 0-3
    (quarter turns, as Android's ``Display.getRotation``)."""

    width: int
    height: int
    rotation: int = 0

    def __post_init__(self) -> None:
        if self.width <= 0 or self.height <= 0:
            raise InvalidInput(f"screen size must be positive, got {self.width}x{self.height}")
        if self.rotation not in (0, 1, 2, 3):
            raise InvalidInput(f"rotation must be 0, 1, 2 or 3 quarter turns, got {self.rotation}")

    def pixel(self, fx: float, fy: float) -> tuple[int, int]:
        """A point given as fractions of the screen, in whole pixels inside the screen."""
        return (min(max(int(fx * self.width), 0), self.width - 1),
                min(max(int(fy * self.height), 0), self.height - 1))


@dataclass(frozen=True)
class ReplayStep:
    """One recorded step of a parent episode, as a branch replays it: the recorded response
    (its parsed action is carried out again), the screen it was taken on (the UI tree's hash,
    else the screenshot's perceptual hash: what the replayed screen is checked against), and
    what the parent recorded about it (copied into the branch's replayed row)."""

    step: int
    response: str
    ui_tree_hash: str | None = None
    image_phash: int | None = None
    reward: float | None = None
    step_reward: float | None = None
    step_reward_reason: str | None = None
    prompt: str | None = None  # JSON text, as stored
    info: str | None = None  # JSON text, as stored


@dataclass(frozen=True)
class Branch:
    """Where an episode starts when it is a branch (`elake branch`): the parent's state at
    its step `step` (K), reached by replaying the parent's recorded actions 0..K-1 after the
    reset to the parent's task and seed. `steps` holds the parent's steps 0..K (step K only
    for its screen, which the replay must reach); a screen that differs from the parent's
    (UI-tree hash, else perceptual hash farther than `threshold` bits) stops the branch before
    anything is recorded. `agent_seed` starts the agent's random stream at step K, so the N
    branches of one step differ from each other and each replays from its seed."""

    parent: str
    step: int
    steps: tuple[ReplayStep, ...]
    agent_seed: int | None = None
    threshold: int = 0

    def __post_init__(self) -> None:
        if [s.step for s in self.steps] != list(range(self.step + 1)):
            raise InvalidInput(f"branch of {self.parent} at step {self.step}: needs the parent's steps "
                               f"0..{self.step} in order, got {[s.step for s in self.steps]}")


@dataclass(frozen=True)
class Task:
    """One episode to run: a task name (a registry key where the device has a registry) and
    the goal text (fetched from the registry when None). Episodes sharing `group_id` form one
    GRPO/GiGPO group.

    `seed` pins the episode's randomness where the device and agent have any (the simulated
    phone's start state, a sampling agent's stream): the same task and seed give the same
    episode whichever worker runs it. None leaves both to their own seeds.

    `branch` makes the episode a branch of a recorded one: the loop replays the parent's
    first steps before the agent acts (`Branch`; `seed` is then the parent's, which the
    device is reset to)."""

    name: str
    goal: str | None = None
    group_id: str | None = None
    seed: int | None = None
    branch: Branch | None = None


class SuiteTask(Protocol):
    """One task of a suite as a trainer sees it: an id to run, the template (task family) it
    comes from, how hard it is, and its split where the suite fixes one (``train`` or
    ``held_out``: held-out tasks use values no training task has; None lets the trainer
    hold out a seeded share)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def difficulty(self) -> str: ...

    @property
    def split(self) -> str | None: ...


@dataclass(frozen=True)
class TaskSuite:
    """What a trainer needs from an environment, and nothing of how it runs: its tasks (to
    split into training and held-out sets), its template names (to choose task families), and
    the apps an agent may open (the tiny policy's `open` vocabulary). An environment with a
    task registry builds one (the simulated phone's is `envs.sim.suite`) and lists it in
    `envs.suites`; the trainer asks `get_suite(config.env)` and imports no environment."""

    name: str
    apps: tuple[str, ...]
    templates: tuple[str, ...]
    tasks: Callable[[], Sequence[SuiteTask]]


@dataclass(frozen=True)
class ActionResult:
    """What the device said about an action: its result text (the env server's ``result``)
    and the low-level commands it ran or, in a dry run, would have run."""

    result: str = ""
    commands: list[Any] = field(default_factory=list)
    dry_run: bool = False

    def info(self) -> dict[str, Any]:
        """The part of a step's ``info`` column that describes how the action was carried out."""
        out: dict[str, Any] = {"result": self.result}
        if self.commands:
            out["commands"] = self.commands
        if self.dry_run:
            out["dry_run"] = True
        return out


@dataclass(frozen=True)
class Evaluation:
    """A task evaluator's verdict on the whole episode (score in [0, 1] and why)."""

    score: float
    reason: str = ""


class Device(ABC):
    """A phone the collection loop can drive. Not thread-safe: one episode at a time."""

    #: Value of the episodes ``env`` column (sim | adb | mobileworld ...).
    env: str = "device"

    @property
    @abstractmethod
    def name(self) -> str:
        """The device's identity for the episodes ``device`` column (a serial, a URL...)."""

    @abstractmethod
    def screen(self) -> Screen: ...

    @abstractmethod
    def screenshot(self) -> bytes:
        """The current screen as encoded image bytes (PNG unless the device sends another)."""

    def ui_tree(self) -> str | None:
        """The accessibility tree as text, where the device can give one."""
        return None

    @abstractmethod
    def execute(self, action: ParsedAction) -> ActionResult:
        """Carry out one valid action. Raises ActionFailed or EnvironmentLost."""

    def start_task(self, task: Task) -> str:
        """Prepare the device for `task` and return its goal. Without a task registry the
        goal is the task's own text."""
        goal = task.goal or task.name
        if not goal.strip():
            raise DeviceUnavailable("a task needs a goal: pass --task \"what the agent should do\"")
        return goal

    def episode_extra(self, task: Task) -> dict[str, Any]:
        """What the device knows about the episode it just set up that a reader may want
        (stored in ``episodes.extra``; the simulated phone's seed and task difficulty)."""
        return {}

    def evaluate(self, task: Task) -> Evaluation | None:
        """Score the finished task, or None where no evaluator exists (success stays unknown)."""
        return None

    def end_task(self, task: Task) -> None:
        """Release what `start_task` set up (nothing, for a device without tasks)."""
        return None

    def close(self) -> None:
        """Release the connection to the device (nothing to release by default)."""
        return None


# --- step judges: an environment's privileged verdict on each step -------------------------

@dataclass(frozen=True)
class StepScore:
    """A judge's verdict on one step: the step reward and why, and the environment reward
    (the task's own outcome, usually given on the final step only)."""

    step_reward: float | None = None
    reason: str | None = None
    reward: float | None = None


class StepJudge(Protocol):
    """Scores each step as it is recorded, from state the agent never sees (the simulated
    phone's rule judge). It reads that state through the device, so the loop stays one."""

    def before(self, device: Device) -> Any:
        """What the judge needs of the state before the action (called after the agent
        replied, just before the action is carried out)."""
        ...

    def score(self, device: Device, before: Any, action: ParsedAction, final: bool) -> StepScore:
        """The step's verdict, the action carried out; `final` when the episode ends here."""
        ...


# --- device kinds: how a device is opened, offered on the command line and re-run ----------

class DeviceSpec(Protocol):
    """How to open a device where a worker runs: picklable, so it travels to worker
    processes and Ray actors, and opened there."""

    def open(self) -> Device: ...


@dataclass(frozen=True)
class DeviceOption:
    """One flag of `elake collect KIND`: the parameter `name` its kind's `collect` reads,
    parsed as `type` (``str | None``, ``bool``, ``int``, ``Path | None``, ``list[str] | None``,
    a ``Literal``). `flag` defaults to ``--name-with-dashes``; `panel` is the heading it is
    listed under in the help (None: the command's own options). `from_env` names an
    `EnvSettings` field that fills the value when the flag is not given (said in the help)."""

    name: str
    type: Any
    help: str
    default: Any = None
    flag: str | None = None
    metavar: str | None = None
    panel: str | None = None
    show_default: bool = True
    from_env: str | None = None


@dataclass(frozen=True)
class Collection:
    """What a device kind makes of its options: one device spec per worker, tags for the
    episodes, task names to run besides those given (`--sample`), or, instead of collecting,
    `lines` to print (`--list`)."""

    devices: Sequence[DeviceSpec] = ()
    tags: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    lines: tuple[str, ...] | None = None


class RerunTarget(Protocol):
    """The device settings a re-run carries (`RerunSpec`): the seed, servers and serial."""

    @property
    def seed(self) -> int: ...

    @property
    def servers(self) -> tuple[str, ...]: ...

    @property
    def serial(self) -> str | None: ...


@dataclass(frozen=True)
class RerunDevice:
    """How `elake rerun --env ENV` runs a set on a device kind: `open` makes its spec from
    the re-run's settings; `check` refuses settings it cannot run with (InvalidInput naming
    the option); `unknown_tasks` names the tasks of a set it does not know, where it has a
    task registry."""

    env: str
    open: Callable[[RerunTarget], DeviceSpec]
    check: Callable[[RerunTarget], None] | None = None
    unknown_tasks: Callable[[Sequence[str]], list[str]] | None = None


@dataclass(frozen=True)
class Exclusive:
    """Options of a kind of which at most one may be given (`required`: exactly one)."""

    names: tuple[str, ...]
    required: bool = False


@dataclass(frozen=True)
class DeviceKind:
    """A device as the jobs see it, registered by its module in `envs.devices`.

    `name` is its `elake collect NAME` command (with `summary` and `description` as its
    help, `doc` the module's docstring); `options` its own flags in help order, then a
    `--policy` choosing among `policies` (the built-in policies it can run), a `--task`
    described by `task_help`, and `--workers` when `workers`. `collect(values)` turns the
    flags' values (by name) into the workers' device specs; `rerun`, when set, lets
    `elake rerun` run sets on it."""

    name: str
    summary: str
    description: str
    doc: str | None
    options: tuple[DeviceOption, ...]
    task_help: str
    collect: Callable[[dict[str, Any]], Collection]
    policies: tuple[str, ...] = ()
    workers: bool = False
    exclusive: tuple[Exclusive, ...] = ()
    rerun: RerunDevice | None = None
