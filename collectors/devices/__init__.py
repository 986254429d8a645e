"""Devices the collection loop can drive: the interface (`base`) and its implementations,
`sim` (the simulated phone), `adb` (a real phone) and `remote` (an environment server).
See README.md in this folder for real-phone use and the environment server API."""

from episodelake.collectors.devices.base import (
    ActionFailed,
    ActionResult,
    Device,
    DeviceError,
    DeviceUnavailable,
    EnvironmentLost,
    Evaluation,
    Screen,
    Task,
)

__all__ = ["ActionFailed", "ActionResult", "Device", "DeviceError", "DeviceUnavailable",
           "EnvironmentLost", "Evaluation", "Screen", "Task"]
