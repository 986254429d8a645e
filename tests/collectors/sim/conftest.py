"""One oracle pass over every registered task, shared by the tests that need it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.tasks import Task, all_tasks
from episodelake.collectors.envs.sim.widgets import Screen
from episodelake.lake.derive.anchor import ui_tree_hash

MAX_STEPS = 40


@dataclass
class OracleRun:
    task: Task
    success: bool
    actions: list[dict] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    screens: list[Screen] = field(default_factory=list)
    labels: list[tuple[str, str]] = field(default_factory=list)  # (screen_id, ui-tree hash)


@pytest.fixture(scope="session")
def oracle_runs() -> list[OracleRun]:
    runs = []
    for i, task in enumerate(all_tasks()):
        phone = Phone(seed=i)
        task.setup(phone)
        run = OracleRun(task, False)
        for _ in range(MAX_STEPS):
            run.screens.append(phone.screen())
            if i % 3 == 0:  # a third of the tasks is plenty for the tree/label cross-check
                run.labels.append((phone.screen_id(), ui_tree_hash(phone.ui_tree())))
            action = task.solution(phone)
            run.actions.append(action)
            outcome = phone.step(action)
            if not outcome.valid:
                run.invalid.append(outcome.reason or "")
            if outcome.done:
                break
        run.success = phone.state.terminated == "success" and task.check(phone)
        runs.append(run)
    return runs


@pytest.fixture(scope="session")
def oracle_screens(oracle_runs) -> list[Screen]:
    return [screen for run in oracle_runs for screen in run.screens]
