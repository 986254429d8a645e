"""A local Ray cluster for the Ray tests (2 CPUs, no dashboard: this is a small shared
machine), started once per test module, and agents that make an actor die mid-episode."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass

import pytest

from episodelake.collectors.envs.base import Device
from episodelake.collectors.jobs.batch import OracleSpec
from episodelake.collectors.loop import Agent, Observation, Reply

#: Tasks with this seed kill the process that runs them before their step 1.
CRASH_SEED = 666


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    # the actors unpickle this module's agents by value: the workers do not import tests
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


class _CrashingAgent:
    def __init__(self, inner: Agent):
        self.inner = inner
        self.name = inner.name
        self.history_length = inner.history_length

    def act(self, observation: Observation) -> Reply:
        if observation.seed == CRASH_SEED and observation.step == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # the actor dies as a node would: no clean-up
        return self.inner.act(observation)


@dataclass(frozen=True)
class CrashingOracle:
    """The sim's oracle, except that the process running a task seeded CRASH_SEED dies."""

    def open(self, device: Device) -> Agent:
        return _CrashingAgent(OracleSpec().open(device))
