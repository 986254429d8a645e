"""The device registry: every device is documented, opens from its `elake collect` options and
its re-run env; a device registered from one module gets its command and its re-runs with no
other file touched; a device missing its help or taking a used name is refused."""

from __future__ import annotations

import dataclasses
import pickle
import re
import sys
import types
from pathlib import Path

import pytest
import typer

from episodelake.api.cli import collect as collect_cli
from episodelake.api.cli.app import Commands, Globals, UsageError
from episodelake.api.settings import EnvSettings
from episodelake.collectors.envs import devices
from episodelake.collectors.envs.adb import AdbSpec
from episodelake.collectors.envs.base import (
    Collection,
    DeviceOption,
)
from episodelake.collectors.envs.devices import DEVICES, register, rerun_envs
from episodelake.collectors.envs.remote import RemoteSpec
from episodelake.collectors.envs.sim.device import SimSpec
from episodelake.collectors.jobs.rerun import ENVS, RerunSpec, device_spec
from episodelake.lake import Lake
from episodelake.lake.storage.errors import InvalidInput
from tests import factories


@pytest.mark.parametrize("name", list(DEVICES))
def test_each_device_is_documented_with_its_options(name, capsys, monkeypatch):
    kind = DEVICES[name]
    assert (kind.doc or "").strip() and kind.summary.strip() and kind.description.strip()
    assert re.search(rf"^- ``{re.escape(name)}``: ", devices.__doc__ or "", re.MULTILINE), name
    if kind.rerun is not None:
        assert f"re-run env ``{kind.rerun.env}``" in " ".join((devices.__doc__ or "").split())
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit):
        collect_cli.kinds([name, "--help"], prog_name="elake collect")
    shown = capsys.readouterr().out
    for option in kind.options:
        assert (option.flag or "--" + option.name.replace("_", "-")) in shown and option.help in shown
    assert kind.task_help in shown and ("--workers" in shown) == kind.workers


def test_the_built_in_devices_make_their_specs_from_their_options(tmp_path):
    apps = tmp_path / "apps.json"
    apps.write_text('{"notes": "org.notes"}', encoding="utf-8")
    adb = DEVICES["adb"].collect({"serial": "emu-1", "all_phones": False, "list_phones": False,
                                  "dry_run": True, "ui_tree": False, "apps": apps})
    assert adb == Collection([AdbSpec("emu-1", True, False, {"notes": "org.notes"})], tags=("dry-run",))
    remote = DEVICES["remote"].collect({"server": ["http://a", "http://b", "http://c"],
                                        "server_file": None, "token": "t", "workers": 2})
    assert [spec.urls for spec in remote.devices] == [("http://a", "http://c"), ("http://b",)]
    assert {spec.options.token for spec in remote.devices} == {"t"}  # type: ignore[attr-defined]
    sim = DEVICES["sim"].collect({"seed": 3, "sample": 2, "workers": 2})
    assert sim.devices == [SimSpec(3, "sim-0"), SimSpec(3, "sim-1")] and len(sim.tasks) == 2
    for collection in (adb, remote, sim):  # specs travel to worker processes and Ray actors
        assert pickle.loads(pickle.dumps(list(collection.devices))) == list(collection.devices)


def test_each_re_run_env_is_a_device_and_opens_from_the_re_run_settings():
    assert set(ENVS) == set(rerun_envs()) == {"sim", "mobileworld", "adb"}
    assert device_spec(RerunSpec("s", "oracle", seed=4)) == SimSpec(4, "sim-4")
    assert device_spec(RerunSpec("s", "random", env="adb", serial="emu-1")) == AdbSpec("emu-1")
    assert device_spec(RerunSpec("s", "random", env="mobileworld", servers=("http://a",))) == \
        RemoteSpec(("http://a",))
    assert DEVICES["sim"].rerun.unknown_tasks(["wifi_on", "no_such_task"]) == ["no_such_task"]  # type: ignore[union-attr]
    with pytest.raises(InvalidInput, match="env must be one of adb, mobileworld, sim, not 'android'"):
        RerunSpec("s", "random", env="android")


def test_a_device_missing_its_help_or_taking_a_used_name_is_refused():
    sim = DEVICES["sim"]
    with pytest.raises(ValueError, match="already registered"):
        register(sim)
    with pytest.raises(ValueError, match="summary, description and doc are required"):
        register(dataclasses.replace(sim, name="sim2", doc=None))
    with pytest.raises(ValueError, match=r"options \['workers'\] are shared"):
        register(dataclasses.replace(sim, name="sim2", options=(DeviceOption("workers", int, "n", 1),)))
    with pytest.raises(ValueError, match=r"unknown built-in policies \['human'\]"):
        register(dataclasses.replace(sim, name="sim2", policies=("human",)))
    with pytest.raises(ValueError, match="re-run env 'sim' is already taken"):
        register(dataclasses.replace(sim, name="sim2"))
    assert "sim2" not in DEVICES


# -- a device in one module: the example of docs/extending.md, run as it stands --------------
def docs_example() -> types.ModuleType:
    """The module docs/extending.md shows under "Adding a device is one file"."""
    text = (Path(__file__).parents[2] / "docs" / "extending.md").read_text(encoding="utf-8")
    section = text.split("### Adding a device is one file", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    module = types.ModuleType("echo_device")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(code, "docs/extending.md", "exec"), module.__dict__)
    return module


def test_a_device_registered_from_one_module_gets_its_command_and_its_re_runs(tmp_path, monkeypatch):
    echo = docs_example()
    monkeypatch.setattr(devices, "DEVICES", dict(DEVICES))  # registered for this test only
    register(echo.DEVICE)
    app = Commands()
    app.command("echo", summary=echo.DEVICE.summary, description=echo.DEVICE.description)(
        collect_cli.collecting(collect_cli._device_command(echo.DEVICE)))
    command = typer.main.get_command(app)
    image = tmp_path / "screen.png"
    image.write_bytes(factories.screenshot(1))
    lake_path = tmp_path / "lake"
    code = command.main(["--image", str(image), "--policy", "random", "--task", "say hi", "--max-steps",
                         "3", "--workers", "2", "--repeat", "2", "--run-id", "e1"],
                        standalone_mode=False, obj=Globals(str(lake_path), False, EnvSettings()))
    assert code in (0, 1)  # 1: the random policy finished no episode
    rows = Lake(lake_path).sql("SELECT env, device, run_id FROM episodes ORDER BY device").to_pylist()
    assert len(rows) == 2 and {(r["env"], r["run_id"]) for r in rows} == {("echo", "e1")}
    assert {r["device"] for r in rows} <= {"echo-0", "echo-1"}
    with pytest.raises(UsageError, match="--image is required"):
        command.main(["--task", "x"], standalone_mode=False, obj=Globals(str(lake_path), False, EnvSettings()))
    assert device_spec(RerunSpec("s", "random", env="echo", seed=5)) == echo.EchoSpec("echo-5", Path("screen.png"))
