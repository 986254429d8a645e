"""The registry of task suites: each environment that trains is one entry here.

A trainer runs on an environment by name (`TrainConfig.env`) and reads its tasks, templates
and app names through the `TaskSuite` interface (`envs.base`), never the environment's own
modules (an import-linter contract in pyproject.toml forbids the trainer to import the
simulator). Adding an environment to train on = its `suite.py` plus one line in `SUITES`.
"""

from __future__ import annotations

from episodelake.collectors.envs.base import TaskSuite
from episodelake.collectors.envs.sim import suite as sim
from episodelake.lake.storage.errors import InvalidInput

#: The suite a trainer uses when none is named.
DEFAULT_SUITE = "sim"
SUITES: dict[str, TaskSuite] = {s.name: s for s in (sim.SUITE,)}


def get_suite(name: str = DEFAULT_SUITE) -> TaskSuite:
    try:
        return SUITES[name]
    except KeyError:
        raise InvalidInput(f"env: no task suite named {name!r}; suites: {', '.join(SUITES)}") from None
