"""The simulated phone as a trainer sees it: its task registry, templates and app names."""

from __future__ import annotations

from episodelake.collectors.envs.base import TaskSuite
from episodelake.collectors.envs.sim.state import APPS
from episodelake.collectors.envs.sim.tasks import TEMPLATES, all_tasks

SUITE = TaskSuite(name="sim", apps=tuple(APPS.values()), templates=tuple(TEMPLATES), tasks=all_tasks)
