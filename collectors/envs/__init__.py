"""Where episodes are played: the `Device` interface (`base`: devices, tasks, their errors,
and the step-judge hook) and its implementations, `sim/` (the simulated phone; `sim.device`
is its `Device`), `adb` (a real phone) and `remote` (a client of an environment server);
`server` serves any of them as an environment server, `jsonaction` is the servers' action
format. See docs/recording.md for real-phone use and the environment server API."""

from episodelake.collectors.envs.base import (
    ActionResult,
    Device,
    Evaluation,
    Screen,
    StepJudge,
    StepScore,
    Task,
)
from episodelake.lake.storage.errors import (
    ActionFailed,
    DeviceError,
    DeviceUnavailable,
    EnvironmentLost,
)

__all__ = ["ActionFailed", "ActionResult", "Device", "DeviceError", "DeviceUnavailable",
           "EnvironmentLost", "Evaluation", "Screen", "StepJudge", "StepScore", "Task"]
