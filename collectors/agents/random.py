"""Uniformly random actions: the agent for smoke tests and throughput benchmarks."""

from __future__ import annotations

import random
from typing import Any

from episodelake.collectors.loop import Observation, Reply
from episodelake.lake.vocab.families import format_tool_call


class RandomPolicy:
    """Uniformly random MAI-UI actions: no model, for smoke tests of the infrastructure and
    throughput benchmarks. Terminates with probability `terminate_p` per step."""

    name = "random"
    history_length = 0

    def __init__(self, seed: int = 0, terminate_p: float = 0.05):
        self._rng = random.Random(seed)
        self.terminate_p = terminate_p

    def act(self, observation: Observation) -> Reply:
        if observation.step == observation.start and observation.seed is not None:
            self._rng = random.Random(observation.seed)  # the episode replays from its seed
        rng = self._rng
        if rng.random() < self.terminate_p:
            action: dict[str, Any] = {"action": "terminate", "status": "fail"}
        else:
            point = [rng.randrange(1000), rng.randrange(100, 1000)]
            action = rng.choice([
                {"action": "click", "coordinate": point},
                {"action": "swipe", "direction": rng.choice(["up", "down", "left", "right"]),
                 "coordinate": point},
                {"action": "system_button", "button": "back"},
                {"action": "wait"},
            ])
        return Reply(format_tool_call(action, thinking=f"random step {observation.step}"))
