"""adb through Debian's real adb server, with fake phones attached over TCP: device listing,
the no device / offline / unauthorized messages, and a whole recorded episode on a phone
whose shell answers from a table."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest

from episodelake.collectors.envs import adb
from episodelake.collectors.envs.base import Task
from episodelake.collectors.loop import run_episode
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.storage.errors import DeviceUnavailable
from tests import factories
from tests.collectors.device_support import ScriptedPolicy, elake
from tests.collectors.fake_adbd import FakeAdbd

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed "
                                "(apt-get install adb)")


@pytest.fixture
def adb_client(tmp_path, monkeypatch):
    """A private adb server (own port, own keys under a temporary HOME)."""
    import adbutils

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HOME": str(tmp_path), "ANDROID_ADB_SERVER_PORT": str(port)}
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(port))
    subprocess.run(["adb", "start-server"], env=env, check=True, capture_output=True, timeout=30)
    yield adbutils.AdbClient(port=port)
    subprocess.run(["adb", "kill-server"], env=env, capture_output=True, timeout=30)


def attach(client, phone: FakeAdbd) -> None:
    try:
        client.connect(phone.serial, timeout=1)
    except Exception:  # an offline phone never finishes the handshake; it is listed anyway
        pass


def test_no_device(adb_client):
    assert adb.list_devices(adb_client) == []
    with pytest.raises(DeviceUnavailable, match="no Android device is attached.*adb devices"):
        adb.connect(client=adb_client)


def test_offline_and_unauthorized_devices_are_explained(adb_client):
    offline, locked = FakeAdbd("offline"), FakeAdbd("unauthorized")
    attach(adb_client, offline)
    attach(adb_client, locked)
    states = {d.serial: d.state for d in adb.list_devices(adb_client)}
    assert states == {offline.serial: "offline", locked.serial: "unauthorized"}
    with pytest.raises(DeviceUnavailable, match=f"device {offline.serial} is offline: replug"):
        adb.connect(offline.serial, client=adb_client)
    with pytest.raises(DeviceUnavailable, match="has not authorized this computer: unlock the phone"):
        adb.connect(locked.serial, client=adb_client)
    with pytest.raises(DeviceUnavailable) as both:
        adb.connect(client=adb_client)
    assert f"{offline.serial} is offline" in str(both.value)
    assert f"{locked.serial} has not authorized" in str(both.value)


def phone_outputs() -> dict:
    return {"wm size": "Physical size: 1080x2400",
            "dumpsys input | grep -m1 SurfaceOrientation": "    SurfaceOrientation: 0",
            "screencap -p": factories.screenshot(3)}


def test_a_recorded_episode_on_a_fake_phone(adb_client, lake):
    phone = FakeAdbd("device", phone_outputs())
    attach(adb_client, phone)
    device = adb.connect(client=adb_client)
    assert device.name == phone.serial and device.screen().width == 1080
    script = [{"action": "click", "coordinate": [999, 999]},
              {"action": "type", "text": "hi there"},
              {"action": "terminate", "status": "success"}]
    rec = Recorder(lake, anchor=None)
    summary = run_episode(device, ScriptedPolicy(script), rec, Task("say hi"), max_steps=5)
    rec.close()
    assert (summary.status, summary.steps, summary.success) == ("finished", 3, None)
    assert "input tap 1079 2399" in phone.commands
    assert "input text hi%sthere" in phone.commands
    steps = lake.steps(summary.episode_id).to_pylist()
    assert [s["action_type"] for s in steps] == ["click", "type", "terminate"]
    assert lake.image(summary.episode_id, 0)[0] == factories.screenshot(3)
    episode = lake.episode(summary.episode_id)
    assert episode["env"] == "adb" and episode["device"] == phone.serial


def test_collect_adb_command_dry_run_sends_no_input(adb_client, lake, fake_model, capsys):
    phone = FakeAdbd("device", phone_outputs())
    attach(adb_client, phone)
    fake_model.script(factories.response("click", coordinate=[10, 10]),
                      factories.response("terminate", status="success"))
    argv = ["--lake", str(lake.path), "collect", "adb", "--dry-run", "--model-url", fake_model.url,
            "--model", "agent", "--task", "open the settings", "--run-id", "dry1"]
    assert elake(argv) == 0
    assert not [c for c in phone.commands if c.startswith("input")]
    rows = lake.sql("SELECT tags, status FROM episodes WHERE run_id = 'dry1'").to_pylist()
    assert rows == [{"tags": ["dry-run"], "status": "finished"}]
    info = lake.sql("SELECT info FROM steps ORDER BY step").to_pylist()[0]["info"]
    assert '"dry_run": true' in info and "input" in info

    assert elake(["collect", "adb", "--list"]) == 0
    assert f"{phone.serial}\tdevice" in capsys.readouterr().out
