"""Task templates for the simulated phone, one module per app (as ``apps/``), and the
registry of every concrete task.

A template has parameters (``notes_create`` takes a title and a body); a :class:`Task` is a
template with values, named by a stable id such as ``notes_create[title=Groceries,body=milk]``.
Each task can set the phone up, check success on the phone's internal state (strictly: the
wrong contact, the wrong minute, the other USB-C cable all fail), and give the oracle's next
action from whatever state the phone is in, so a demo policy can add noise and still finish.

Goals never say how to do the task, only what should be true afterwards. ``base`` holds the
task types and what the apps' tasks share; a new app's tasks are a module named by the
app's id with a ``TEMPLATES`` list, its id added to ``TASK_APPS`` (registry order is part of
``sample_tasks``'s seeded order, so new apps go last). ``long`` is the one module that is not
an app: the long-horizon templates that chain several apps' sub-goals (difficulty ``long``).
"""

from __future__ import annotations

import random
from functools import cache
from importlib import import_module

from episodelake.collectors.envs.sim.tasks.base import DIFFICULTIES, TASK_ID, Params, Task, Template
from episodelake.lake.storage.errors import InvalidInput, NotFound

#: The apps whose task modules make up the registry, in registry order.
TASK_APPS = ("settings", "launcher", "clock", "notes", "contacts", "phone", "messages", "shop", "long")
APP_TASKS = tuple(import_module(f"{__name__}.{app}") for app in TASK_APPS)
TEMPLATES: dict[str, Template] = {t.name: t for app in APP_TASKS for t in app.TEMPLATES}


@cache
def all_tasks() -> tuple[Task, ...]:
    """Every registered task, template by template."""
    return tuple(Task(template, tuple(params.items())) for template in TEMPLATES.values()
                 for params in template.grid)


@cache
def _by_id() -> dict[str, Task]:
    return {task.id: task for task in all_tasks()}


def get_task(task_id: str) -> Task:
    """The task with this id, e.g. ``get_task("wifi_on")`` or
    ``get_task("notes_create[title=Groceries,body=milk]")``."""
    task = _by_id().get(task_id)
    if task is not None:
        return task
    match = TASK_ID.match(task_id)
    name = match.group("name") if match else task_id
    if name not in TEMPLATES:
        raise NotFound(f"unknown task template {name!r}; templates: {', '.join(TEMPLATES)}")
    examples = [t.id for t in all_tasks() if t.name == name][:3]
    raise NotFound(f"no task {task_id!r}; {name} is registered with parameters like: {'; '.join(examples)}")


@cache
def _by_goal() -> dict[str, Task]:
    return {task.goal: task for task in all_tasks()}


def task_for_goal(goal: str) -> Task:
    """The task whose goal text this is (goals are unique)."""
    task = _by_goal().get(goal)
    if task is None:
        raise NotFound(f"no simulated task has the goal {goal!r}")
    return task


#: Difficulties `sample_tasks` draws from unless told: the long templates need more steps than
#: a sampled collection allows (and leaving them out keeps every seed's sample as it was).
SAMPLED = ("easy", "medium", "hard")


def sample_tasks(n: int, seed: int = 0, difficulties: tuple[str, ...] = SAMPLED) -> list[Task]:
    """``n`` distinct tasks of `difficulties`, spread over templates: templates are visited
    round-robin in a seeded order, each giving its next task in a seeded order."""
    tasks = [task for task in all_tasks() if task.difficulty in difficulties]
    if not 0 <= n <= len(tasks):
        raise InvalidInput(f"tasks: asked for {n}; {len(tasks)} are registered")
    rng = random.Random(seed)
    queues: dict[str, list[Task]] = {}
    for task in tasks:
        queues.setdefault(task.name, []).append(task)
    for queue in queues.values():
        rng.shuffle(queue)
    names = list(queues)
    rng.shuffle(names)
    picked: list[Task] = []
    while len(picked) < n:
        for name in names:
            if queues[name] and len(picked) < n:
                picked.append(queues[name].pop())
    return picked


__all__ = ["APP_TASKS", "DIFFICULTIES", "SAMPLED", "TASK_APPS", "TEMPLATES", "Params", "Task", "Template", "all_tasks",
           "get_task", "sample_tasks", "task_for_goal"]
