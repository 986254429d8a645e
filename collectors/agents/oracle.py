"""The simulated phone's oracle as an agent: the task's solution plus the mistakes real GUI
agents make (:class:`DemoPolicy`), played through the episode loop by :class:`OraclePolicy`,
which reads the phone through the simulated device it was opened on.

It answers in the MAI-UI format (``<thinking>`` then a ``<tool_call>`` with the
``mobile_use`` arguments, coordinates on the 0-999 scale), so the same parser and viewer
handle its episodes and a VLM's. Noise kinds, each a probability per step:

- grounding: a tap lands off its target (the thinking still names the intended target);
- planning: a wrong move (another app, back, a tap on something unrelated);
- premature_terminate: declares success before the goal holds;
- loop: repeats its previous action a few more times.

Every decision reports which noise (if any) produced it, which gives demo data a ground
truth for failure categories.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from episodelake.collectors.envs.sim.device import SimDevice
from episodelake.collectors.envs.sim.geometry import HEIGHT, WIDTH, to_coordinate, to_pixels
from episodelake.collectors.envs.sim.navigation import TAP_HANDLERS
from episodelake.collectors.envs.sim.phone import Phone, describe, hit
from episodelake.collectors.envs.sim.state import APPS
from episodelake.collectors.envs.sim.tasks import Task
from episodelake.collectors.loop import Observation, Reply
from episodelake.lake.storage.errors import DeviceError, InvalidInput
from episodelake.lake.vocab.families import format_tool_call
from episodelake.lake.vocab.seeds import derive

Action = dict[str, object]
NOISE_KINDS = ("grounding", "planning", "premature_terminate", "loop")
TAP_VERBS = {"click": "tap", "long_press": "long-press", "double_tap": "double-tap"}
#: What the policy says it does, by action type (a tap names its target instead).
SAYS = {
    "swipe": "What I need is not in view; I will swipe {direction} to scroll.",
    "type": 'I will type "{text}".',
    "open": "I will open {text}.",
    "system_button": "I will press {button}.",
    "answer": "The answer is {text}.",
}


@dataclass(frozen=True)
class NoiseConfig:
    """Per-step probabilities of each mistake; all zero gives the oracle itself."""

    grounding: float = 0.0
    planning: float = 0.0
    premature_terminate: float = 0.0
    loop: float = 0.0
    #: How far a grounding error lands from the aimed point, in logical pixels.
    grounding_px: tuple[int, int] = (90, 260)
    #: How many times a loop repeats the previous action.
    loop_repeats: int = 2

    def __post_init__(self) -> None:
        if min(self.grounding, self.planning, self.premature_terminate, self.loop) < 0 or self.total > 1:
            raise InvalidInput(f"noise probabilities must be >= 0 and sum to at most 1, got {self}")

    @property
    def total(self) -> float:
        return self.grounding + self.planning + self.premature_terminate + self.loop

    def scaled(self, total: float) -> NoiseConfig:
        """The same mix of mistakes, made with probability `total` per step in all."""
        if not 0 <= total <= 1:
            raise InvalidInput(f"a total mistake probability must be in [0, 1], got {total}")
        factor = total / self.total if self.total else 0.0
        return replace(self, grounding=self.grounding * factor, planning=self.planning * factor,
                       premature_terminate=self.premature_terminate * factor, loop=self.loop * factor)

    @classmethod
    def demo(cls) -> NoiseConfig:
        """A mix that fails a realistic share of episodes, with every failure kind present."""
        return cls(grounding=0.12, planning=0.10, premature_terminate=0.06, loop=0.05)


@dataclass(frozen=True)
class Decision:
    """One step of the policy: the response text, its arguments, and the noise behind it."""

    arguments: Action
    thinking: str
    noise: str | None = None

    @property
    def response(self) -> str:
        return format_tool_call(self.arguments, self.thinking)


class DemoPolicy:
    """The oracle of ``task`` with ``noise``; deterministic for a seed."""

    def __init__(self, task: Task, noise: NoiseConfig | None = None, seed: int = 0):
        self.task = task
        self.noise = noise or NoiseConfig()
        self.rng = random.Random(seed)
        self._last: Decision | None = None
        self._repeats_left = 0

    def act(self, phone: Phone) -> str:
        """The MAI-UI response text for the phone's current screen."""
        return self.decide(phone).response

    def decide(self, phone: Phone) -> Decision:
        decision = self._decide(phone)
        self._last = decision
        return decision

    def _decide(self, phone: Phone) -> Decision:
        if self._repeats_left and self._last is not None:
            self._repeats_left -= 1
            return Decision(self._last.arguments, self._last.thinking, "loop")
        oracle = self.task.solution(phone)
        if oracle["action"] == "terminate":
            return Decision(oracle, self._explain(phone, oracle))
        noise = self.noise
        roll = self.rng.random()
        if roll < noise.premature_terminate:
            return Decision({"action": "terminate", "status": "success"},
                            f"{self._context(phone)} This looks done; I will finish.", "premature_terminate")
        roll -= noise.premature_terminate
        if roll < noise.planning:
            return self._wrong_move(phone)
        roll -= noise.planning
        if roll < noise.grounding and oracle["action"] in ("click", "long_press", "double_tap"):
            return Decision(self._miss(oracle), self._explain(phone, oracle), "grounding")
        roll -= noise.grounding
        if roll < noise.loop:
            self._repeats_left = noise.loop_repeats
        return Decision(oracle, self._explain(phone, oracle))

    # --- mistakes ----------------------------------------------------------------------

    def _miss(self, action: Action) -> Action:
        """The same tap, landed ``grounding_px`` away in a random direction."""
        x, y = to_pixels(*action["coordinate"])  # type: ignore[misc]  # Action values are objects; a tap's coordinate is [x, y]
        distance = self.rng.uniform(*self.noise.grounding_px)
        angle = self.rng.uniform(0, 2 * math.pi)
        x = min(max(x + distance * math.cos(angle), 0), WIDTH)
        y = min(max(y + distance * math.sin(angle), 0), HEIGHT)
        return {**action, "coordinate": to_coordinate(x, y)}

    def _wrong_move(self, phone: Phone) -> Decision:
        """A plausible but wrong step: the wrong app, going back, or tapping something else."""
        context = self._context(phone)
        choice = self.rng.choice(("app", "back", "tap"))
        if choice == "app":
            app = self.rng.choice([name for app, name in APPS.items() if app != phone.state.foreground])
            return Decision({"action": "open", "text": app}, f"{context} This is probably done in {app}.",
                            "planning")
        if choice == "tap":
            screen = phone.screen()
            targets = [(w, w.visible) for w in screen.walk() if w.on_click is not None and w.visible is not None
                       and w.kind != "key" and not w.rid.startswith("com.android.systemui")]
            if targets:
                widget, box = self.rng.choice(targets)
                x, y = box.center
                return Decision({"action": "click", "coordinate": to_coordinate(x, y)},
                                f"{context} I will tap {describe(widget)}.", "planning")
        return Decision({"action": "system_button", "button": "back"}, f"{context} I should go back first.",
                        "planning")

    # --- thinking ------------------------------------------------------------------------

    def _context(self, phone: Phone) -> str:
        title = phone.screen().title or "an app screen"
        return f"Goal: {self.task.goal} I am on {title}."

    def _explain(self, phone: Phone, action: Action) -> str:
        """What the policy says it is doing, phrased from the screen it sees."""
        context = self._context(phone)
        kind = action["action"]
        if kind in TAP_HANDLERS:
            x, y = to_pixels(*action["coordinate"])  # type: ignore[misc]  # Action values are objects; a tap's coordinate is [x, y]
            target = hit(phone.screen(), x, y, (TAP_HANDLERS[kind], "on_set_value")).target
            what = describe(target) if target is not None else "there"
            return f"{context} I will {TAP_VERBS[kind]} {what}."
        if kind == "terminate":
            return f"{context} The goal is reached." if action["status"] == "success" else \
                f"{context} I cannot reach the goal from here."
        return f"{context} {SAYS.get(str(kind), 'I will {action}.').format(**action)}"


class OraclePolicy:
    """The sim's demo policy on `device`: the registry's oracle, plus the mistakes of
    `noise` (none by default), answering in MAI-UI text. Each step's `info` names the
    mistake behind it, if any. It reads the phone through the device it was opened on,
    which is why it plays only the simulated phone."""

    history_length = 0

    def __init__(self, device: SimDevice, noise: NoiseConfig | None = None, seed: int = 0):
        if not isinstance(device, SimDevice):
            raise InvalidInput("the oracle policy plays only on the simulated phone (--sim)")
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
        if observation.step == observation.start or self._policy is None or self._policy.task is not task:
            # a fresh random stream per episode: the episode's own seed where it has one,
            # else the next of this policy's, so either way it is reproducible
            self._episodes += 1
            seed = observation.seed
            if seed is None:
                seed = derive(self.seed, "episode", self._episodes)
            self._policy = DemoPolicy(task, self.noise, seed=seed)
        decision = self._policy.decide(self.device.phone)
        return Reply(decision.response, info={"noise": decision.noise} if decision.noise else None)
