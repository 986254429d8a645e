"""A rule-based step judge with the interface of the VLM step-reward judge.

``judge(goal, before, action, after) -> (score, reason)``: score 1 when the step brought the
phone closer to the goal. "Closer" is measured with the task's oracle: the number of oracle
steps still needed from a state (replayed on a copy of it). A step that takes a different
but valid route can score 0 when the oracle's route does not get shorter; for demo data
this strictness is what we want, since the noise is defined relative to the oracle.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping

from episodelake.collectors.envs.sim.actions import InvalidAction, validate
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import PhoneState
from episodelake.collectors.envs.sim.tasks import Task, task_for_goal

#: Oracle steps after which a state counts as not leading to the goal.
DEFAULT_HORIZON = 40


#: States remembered per task and screen (the newest); a lookup compares with each of them.
PER_SCREEN = 64


def _timeless(state: PhoneState) -> PhoneState:
    """The state with its clock at 0 (a shallow copy): what an oracle's distance depends on."""
    return dataclasses.replace(state, clock_s=0)


def _memo_key(task_id: str, state: PhoneState) -> tuple[str, str | None]:
    route = state.route
    return task_id, None if route is None else route.key


class RuleJudge:
    """Scores steps of simulated episodes.

    Distances are remembered for every state the oracle's replay passes through: when the
    agent then takes the oracle's step, its next state is one of them, so most steps cost a
    lookup instead of a replay. They are remembered without the clock (`_timeless`): each step
    moves the status bar's clock, which no task reads, so a screen the group's episodes reach
    again at other times (the long tasks' lists and forms) is a lookup too. A task whose goal
    or oracle read the time would need the clock back in `_timeless`.
    """

    def __init__(self, horizon: int = DEFAULT_HORIZON, memory: int = 512):
        self.horizon = horizon
        self.memory = memory
        # (task id, screen on top) -> [(state without its clock, distance)], newest last; the
        # screen narrows the search cheaply, and each list keeps its `PER_SCREEN` newest
        self._memos: OrderedDict[tuple[str, str | None], list[tuple[PhoneState, int | None]]] = OrderedDict()
        self.replays = 0  # oracle replays run (the lookups that missed), for tests and benchmarks

    def judge(self, goal: str | Task, before: PhoneState, action: Mapping[str, object] | None,
              after: PhoneState) -> tuple[int, str]:
        """Scores one step; ``before`` and ``after`` are :meth:`Phone.snapshot` states and
        ``action`` the parsed arguments (None when the response could not be parsed)."""
        task = goal if isinstance(goal, Task) else task_for_goal(goal)
        if action is None:
            return 0, "the response has no parsable action"
        try:
            parsed = validate(action)
        except InvalidAction as error:
            return 0, f"invalid action: {error}"
        if parsed.type == "terminate":
            reached = task.template.check(after, dict(task.params))
            if parsed.status == "success":
                return (1, "terminated with the goal reached") if reached else \
                    (0, "terminated before the goal was reached")
            return (0, "gave up although the goal was reached") if reached else (0, "gave up")
        start = self.distance(task, before)
        end = self.distance(task, after)
        if end is None:
            return 0, "the goal can no longer be reached" if start is not None else "the goal is out of reach"
        if start is None:
            return 1, f"back on track: {end} steps from the goal"
        if end < start:
            return 1, f"progress: {start} -> {end} steps from the goal"
        if end == start:
            return 0, f"no progress: still {end} steps from the goal"
        return 0, f"moved away: {start} -> {end} steps from the goal"

    def distance(self, task: Task, state: PhoneState) -> int | None:
        """Oracle steps from ``state`` until the goal holds (0 when it already does); None
        when the oracle gives up or needs more than ``horizon`` steps."""
        timeless = _timeless(state)
        for known, distance in reversed(self._memos.get(_memo_key(task.id, state), ())):
            if known == timeless:
                return distance
        self.replays += 1
        path, reached = self._replay(task, state)
        for k, visited in enumerate(path):
            self._remember(task.id, visited, len(path) - 1 - k if reached else None)
        return len(path) - 1 if reached else None

    def _replay(self, task: Task, state: PhoneState) -> tuple[list[PhoneState], bool]:
        """The states the oracle goes through from ``state``, and whether it reached the goal."""
        phone = Phone.from_snapshot(state)
        phone.state.terminated = None
        path = [phone.snapshot()]
        for _ in range(self.horizon):
            if task.check(phone):
                return path, True
            action = task.solution(phone)
            if action["action"] == "terminate":
                return path, False
            phone.step(action)
            path.append(phone.snapshot())
        return path, task.check(phone)

    def _remember(self, task_id: str, state: PhoneState, distance: int | None) -> None:
        key = _memo_key(task_id, state)
        known = self._memos.setdefault(key, [])
        known.append((_timeless(state), distance))
        del known[:-PER_SCREEN]
        self._memos.move_to_end(key)
        while len(self._memos) > self.memory:
            self._memos.popitem(last=False)
