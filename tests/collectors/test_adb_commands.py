"""adb without a phone: coordinate conversion, the shell commands each action becomes, and the
device's behaviour over a stand-in shell that records what it is sent."""

from __future__ import annotations

import base64
from types import SimpleNamespace

import pytest

from episodelake.collectors.envs import adb
from episodelake.collectors.envs.base import Screen
from episodelake.lake.storage.errors import ActionFailed, DeviceUnavailable, EnvironmentLost
from episodelake.lake.vocab.families import format_tool_call, parse_response
from tests import factories

PORTRAIT = Screen(1080, 2400)


def act(**arguments) -> object:
    parsed = parse_response(format_tool_call(arguments))
    assert parsed.valid, parsed.error
    return parsed


def test_grid_corners_land_inside_the_screen():
    assert adb.action_commands(act(action="click", coordinate=[0, 0]), PORTRAIT) == [
        ["input", "tap", "0", "0"]]
    assert adb.action_commands(act(action="click", coordinate=[999, 999]), PORTRAIT) == [
        ["input", "tap", "1079", "2399"]]
    # the reference's projection: int(x / 999 * width)
    assert adb.action_commands(act(action="click", coordinate=[500, 250]), PORTRAIT) == [
        ["input", "tap", str(int(500 / 999 * 1080)), str(int(250 / 999 * 2400))]]


def test_rotation_swaps_the_screen_and_points_follow_it():
    landscape = adb.oriented((1080, 2400), 1)
    assert (landscape.width, landscape.height, landscape.rotation) == (2400, 1080, 1)
    assert adb.oriented((1080, 2400), 2) == Screen(1080, 2400, 2)
    cmd = adb.action_commands(act(action="click", coordinate=[999, 0]), landscape)
    assert cmd == [["input", "tap", "2399", "0"]]


def test_other_screen_sizes_are_not_assumed_to_be_1080x2400():
    small = Screen(720, 1600)
    assert adb.action_commands(act(action="click", coordinate=[999, 999]), small) == [
        ["input", "tap", "719", "1599"]]


@pytest.mark.parametrize("direction,end", [("up", (540, 480)), ("down", (540, 1920)),
                                           ("left", (216, 1200)), ("right", (864, 1200))])
def test_swipe_moves_the_finger_in_its_direction_from_the_centre(direction, end):
    cmd = adb.action_commands(act(action="swipe", direction=direction), PORTRAIT)
    assert cmd == [["input", "swipe", "540", "1200", str(end[0]), str(end[1]), "400"]]


def test_swipe_from_a_point_stays_on_screen():
    cmd = adb.action_commands(act(action="swipe", direction="up", coordinate=[500, 100]), PORTRAIT)
    assert cmd[0][:4] == ["input", "swipe", str(int(500 / 999 * 1080)), str(int(100 / 999 * 2400))]
    assert cmd[0][5] == "0"  # clamped at the top edge


def test_long_press_drag_double_tap_keys_and_open():
    m = adb.Motion()
    assert adb.action_commands(act(action="long_press", coordinate=[0, 0]), PORTRAIT) == [
        ["input", "swipe", "0", "0", "0", "0", str(m.long_press_ms)]]
    assert adb.action_commands(act(action="double_tap", coordinate=[0, 0]), PORTRAIT) == [
        ["input", "tap", "0", "0"]] * 2
    drag = act(action="drag", start_coordinate=[0, 0], end_coordinate=[999, 999])
    assert adb.action_commands(drag, PORTRAIT) == [
        ["input", "draganddrop", "0", "0", "1079", "2399", str(m.drag_ms)]]
    for button, key in adb.KEYCODES.items():
        assert adb.action_commands(act(action="system_button", button=button), PORTRAIT) == [
            ["input", "keyevent", key]]
    assert adb.action_commands(act(action="open", text="Settings"), None,
                               package="com.android.settings") == [
        ["monkey", "-p", "com.android.settings", "-c", "android.intent.category.LAUNCHER", "1"]]
    for final in (act(action="wait"), act(action="terminate", status="success"),
                  act(action="answer", text="42")):
        assert adb.action_commands(final, None) == []


def test_a_pointed_action_needs_the_screen():
    with pytest.raises(ValueError, match="screen size"):
        adb.action_commands(act(action="click", coordinate=[1, 1]), None)


def test_ascii_text_spaces_and_newlines():
    assert adb.input_text_commands("hi there") == [["input", "text", "hi%sthere"]]
    assert adb.input_text_commands("a\nb") == [
        ["input", "text", "a"], ["input", "keyevent", "KEYCODE_ENTER"], ["input", "text", "b"]]
    assert adb.can_input_text("it's $5 & more")
    for text in ("héllo", "你好", "tab\there", "100%s"):
        assert not adb.can_input_text(text)
        with pytest.raises(ActionFailed, match="ADBKeyboard"):
            adb.input_text_commands(text)


def test_non_ascii_text_goes_through_the_ime_broadcast():
    [cmd] = adb.ime_text_commands("你好 café")
    assert cmd[:6] == ["am", "broadcast", "-a", "ADB_INPUT_B64", "--es", "msg"]
    assert base64.b64decode(cmd[6]).decode() == "你好 café"


def test_wm_size_and_rotation_parsing():
    assert adb.parse_wm_size("Physical size: 1080x2400") == (1080, 2400)
    assert adb.parse_wm_size("Physical size: 1440x3120\nOverride size: 1080x2340") == (1080, 2340)
    with pytest.raises(EnvironmentLost, match="wm size"):
        adb.parse_wm_size("error: no devices")
    assert adb.parse_rotation("    SurfaceOrientation: 3") == 3
    assert adb.parse_rotation("mDisplayInfos orientation=1 rotation") == 1
    assert adb.parse_rotation("nothing here") is None


class FakeShell:
    """Stands in for adbutils.AdbDevice: canned outputs by command, a log of what was sent."""

    def __init__(self, serial="FAKE123", outputs=None, fail=None):
        self.serial = serial
        self.sent: list[str] = []
        self.outputs = {"wm size": "Physical size: 1080x2400",
                        "dumpsys input | grep -m1 SurfaceOrientation": "SurfaceOrientation: 0",
                        "screencap -p": factories.screenshot(1),
                        "ime list -s": "com.android.inputmethod.latin/.LatinIME",
                        "settings get secure default_input_method": "com.android.inputmethod.latin/.LatinIME",
                        "pm list packages": "package:com.android.settings\npackage:com.example.notes",
                        **(outputs or {})}
        self.fail = fail

    def shell(self, cmdargs, stream=False, timeout=None, encoding="utf-8", rstrip=True):
        line = cmdargs if isinstance(cmdargs, str) else " ".join(cmdargs)
        if self.fail:
            raise self.fail
        self.sent.append(line)
        out = self.outputs.get(line, "")
        if encoding is None:
            return out if isinstance(out, bytes) else out.encode()
        return out.decode() if isinstance(out, bytes) else out


def test_device_sends_commands_with_the_real_screen_size():
    shell = FakeShell(outputs={"dumpsys input | grep -m1 SurfaceOrientation": "SurfaceOrientation: 1"})
    device = adb.AdbDevice(shell)
    result = device.execute(act(action="click", coordinate=[999, 0]))
    assert shell.sent[-1] == "input tap 2399 0"
    assert result.commands == [["input", "tap", "2399", "0"]] and not result.dry_run
    assert device.screenshot().startswith(b"\x89PNG")
    assert device.name == "FAKE123"


def test_dry_run_reads_the_screen_but_sends_no_input():
    shell = FakeShell()
    device = adb.AdbDevice(shell, dry_run=True)
    device.screenshot()
    result = device.execute(act(action="type", text="héllo"))
    result2 = device.execute(act(action="click", coordinate=[10, 10]))
    assert result.dry_run and result.commands[0][:4] == ["am", "broadcast", "-a", "ADB_INPUT_B64"]
    assert result2.info()["dry_run"] is True
    assert not any(s.startswith(("input", "am ", "ime set", "monkey")) for s in shell.sent)


def test_unicode_text_without_adbkeyboard_names_the_fix():
    device = adb.AdbDevice(FakeShell())
    with pytest.raises(ActionFailed, match="adb install ADBKeyboard.apk"):
        device.execute(act(action="type", text="你好"))


def test_unicode_text_with_adbkeyboard_restores_the_keyboard():
    ime = adb.ADB_KEYBOARD_IME
    shell = FakeShell(outputs={"ime list -s": f"com.android.inputmethod.latin/.LatinIME\n{ime}"})
    adb.AdbDevice(shell).execute(act(action="type", text="你好"))
    assert shell.sent[-3] == f"ime set {ime}"
    assert shell.sent[-2].startswith("am broadcast -a ADB_INPUT_B64 --es msg ")
    assert shell.sent[-1] == "ime set com.android.inputmethod.latin/.LatinIME"


def test_open_resolves_labels_packages_and_installed_names():
    shell = FakeShell()
    device = adb.AdbDevice(shell, apps={"My Bank": "com.bank.app"})
    assert device.resolve_package("settings") == "com.android.settings"
    assert device.resolve_package("com.foo.bar") == "com.foo.bar"
    assert device.resolve_package("my bank") == "com.bank.app"
    assert device.resolve_package("Notes") == "com.example.notes"
    with pytest.raises(ActionFailed, match="--apps"):
        device.resolve_package("Nonexistent App")


def test_failed_input_and_lost_connection_are_reported():
    shell = FakeShell(outputs={"input keyevent KEYCODE_BACK": "Error: Unknown command: keyevent"})
    with pytest.raises(ActionFailed, match="Unknown command"):
        adb.AdbDevice(shell).execute(act(action="system_button", button="back"))
    lost = adb.AdbDevice(FakeShell(fail=OSError("connection reset")))
    with pytest.raises(EnvironmentLost, match="screencap -p.*connection reset.*adb devices"):
        lost.screenshot()
    not_png = adb.AdbDevice(FakeShell(outputs={"screencap -p": b"garbage"}))
    with pytest.raises(EnvironmentLost, match="not a PNG"):
        not_png.screenshot()


def test_uiautomator_failure_keeps_the_step_without_a_tree(caplog):
    path = "/data/local/tmp/elake_window_dump.xml"
    cmd = f"uiautomator dump {path} >/dev/null && cat {path}"
    assert adb.AdbDevice(FakeShell(), with_ui_tree=False).ui_tree() is None
    ok = adb.AdbDevice(FakeShell(outputs={cmd: "<?xml version='1.0'?><hierarchy/>"}), with_ui_tree=True)
    assert ok.ui_tree().startswith("<?xml")
    bad = adb.AdbDevice(FakeShell(outputs={cmd: "ERROR: could not get idle state."}), with_ui_tree=True)
    assert bad.ui_tree() is None
    assert "without a UI tree" in caplog.text


class FakeClient:
    """Stands in for adbutils.AdbClient's listing."""

    host, port = "127.0.0.1", 5037

    def __init__(self, states: dict[str, str] | Exception):
        self.states = states

    def list(self, extended=False):
        if isinstance(self.states, Exception):
            raise self.states
        return [SimpleNamespace(serial=s, state=st, tags={"model": "Pixel"}) for s, st in self.states.items()]

    def device(self, serial):
        return FakeShell(serial)


@pytest.mark.parametrize("states,message", [
    ({}, "no Android device is attached"),
    ({"A": "offline"}, "device A is offline: replug"),
    ({"A": "unauthorized"}, "device A has not authorized this computer"),
    ({"A": "no"}, "udev rule"),
    ({"A": "device", "B": "device"}, r"2 devices are attached \(A, B\): pass --serial"),
    (ConnectionRefusedError("refused"), "cannot reach the adb server at 127.0.0.1:5037"),
])
def test_connect_explains_why_no_device_can_be_used(states, message):
    with pytest.raises(DeviceUnavailable, match=message):
        adb.connect(client=FakeClient(states))


def test_connect_by_serial():
    client = FakeClient({"A": "device", "B": "unauthorized"})
    assert adb.connect("A", client=client).name == "A"
    with pytest.raises(DeviceUnavailable, match="device B has not authorized"):
        adb.connect("B", client=client)
    with pytest.raises(DeviceUnavailable, match=r"device C is not attached \(attached: A \(device\)"):
        adb.connect("C", client=client)
    assert adb.ready_serials(client) == ["A"]
