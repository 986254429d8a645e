"""The registry of devices: the extension point for driving a new kind of phone.

Each device module registers one :class:`~episodelake.collectors.envs.base.DeviceKind`: the
spec a batch worker opens it from, its `elake collect NAME` command (options, help, how the
options become worker specs) and, when it can re-run a set, its `elake rerun --env` mapping.
The batch runner (`collectors.jobs.batch`), re-runs (`collectors.jobs.rerun`) and the command
line (`api/cli/collect.py`, `api/cli/rerun.py`) are built from this registry and name no
device.

Registered devices (each module's docstring is its full description):

- ``adb``: a real Android phone over adb (`collectors/envs/adb.py`); re-run env ``adb``
- ``remote``: phones behind ClawGUI-Server / MobileWorld servers (`collectors/envs/remote.py`);
  re-run env ``mobileworld``
- ``sim``: the simulated phone, in this process (`collectors/envs/sim/device.py`); re-run env
  ``sim``

To add one: write a module in `collectors/envs/` with a `Device` subclass, a picklable spec
whose `open()` builds it, and ``DEVICE = DeviceKind(name=..., summary=..., description=...,
doc=__doc__, options=..., task_help=..., collect=...)``; add the module to `_BUILT_IN` below
(or call `register` from your own package) and list it here and in docs/extending.md;
tests/collectors/test_devices.py checks every registered device is documented and opens
from its command line. A device without a summary, description or docstring is refused, and
so is an option or re-run env name already taken.
"""

from __future__ import annotations

from episodelake.collectors.envs import adb, remote
from episodelake.collectors.envs.base import DeviceKind, RerunDevice
from episodelake.collectors.envs.sim import device as sim
from episodelake.lake.storage.errors import InvalidInput

#: The built-in devices, in the order `elake collect --help` lists them.
_BUILT_IN = (adb.DEVICE, remote.DEVICE, sim.DEVICE)

#: The policies a device may offer as `--policy`: those the batch runner can open.
BUILTIN_POLICIES = ("random", "oracle")

DEVICES: dict[str, DeviceKind] = {}

#: Reserved flags: the options every `elake collect` command has already.
_SHARED = frozenset({"policy", "task", "workers", "model_url", "model", "api_key_env", "style",
                     "history", "task_file", "repeat", "max_steps", "run_id", "tag", "ray",
                     "ray_address", "ctx", "policy_choice", "run_choice"})


def register(kind: DeviceKind) -> None:
    """Add a device kind. Refused: a name or re-run env already taken, no summary,
    description or docstring, an option named like a shared one, an unknown policy."""
    if kind.name in DEVICES:
        raise InvalidInput(f"a device named {kind.name!r} is already registered")
    if not kind.summary.strip() or not kind.description.strip() or not (kind.doc or "").strip():
        raise InvalidInput(f"device {kind.name!r}: summary, description and doc are required")
    clash = sorted({o.name for o in kind.options} & _SHARED)
    if clash:
        raise InvalidInput(f"device {kind.name!r}: options {clash} are shared by every `elake collect` "
                           "command; name them otherwise")
    unknown = sorted(set(kind.policies) - set(BUILTIN_POLICIES))
    if unknown:
        raise InvalidInput(f"device {kind.name!r}: unknown built-in policies {unknown}; "
                           f"known: {', '.join(BUILTIN_POLICIES)}")
    if kind.rerun is not None and kind.rerun.env in rerun_envs():
        raise InvalidInput(f"device {kind.name!r}: the re-run env {kind.rerun.env!r} is already taken")
    DEVICES[kind.name] = kind


def get_device(name: str) -> DeviceKind:
    try:
        return DEVICES[name]
    except KeyError:
        raise InvalidInput(f"device: unknown device {name!r}; registered: {', '.join(DEVICES)}") from None


def rerun_envs() -> dict[str, RerunDevice]:
    """The envs `elake rerun --env` accepts, each with its device's re-run mapping."""
    return {kind.rerun.env: kind.rerun for kind in DEVICES.values() if kind.rerun is not None}


def rerun_device(env: str) -> RerunDevice:
    envs = rerun_envs()
    try:
        return envs[env]
    except KeyError:
        raise InvalidInput(f"env must be one of {', '.join(envs)}, not {env!r}") from None


def envs_with_policy(policy: str) -> list[str]:
    """The re-run envs whose device can run built-in `policy`."""
    return [kind.rerun.env for kind in DEVICES.values()
            if kind.rerun is not None and policy in kind.policies]


for _kind in _BUILT_IN:
    register(_kind)
