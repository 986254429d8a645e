"""A real Android phone over adb (adbutils): screenshots, UI trees, and input commands.

Every action becomes `adb shell` command lines built by :func:`action_commands`, a pure
function of the action and the screen, so what a dry run records is exactly what a real run
sends. Points arrive as fractions of the screenshot and become pixels of the current screen
(``wm size``, swapped in landscape), never of an assumed 1080x2400.

Text: ASCII goes through ``input text`` (spaces as ``%s``, newlines as ENTER presses);
anything else needs the ADBKeyboard input method (https://github.com/senzhk/ADBKeyBoard),
which types base64-encoded text from a broadcast. Apps open by package name, or by label
through a label -> package table (built-in common apps plus the user's ``--apps`` file),
else by a unique match among installed package names.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from episodelake.collectors.envs.base import (
    ActionResult,
    Collection,
    Device,
    DeviceKind,
    DeviceOption,
    Exclusive,
    RerunDevice,
    RerunTarget,
    Screen,
)
from episodelake.lake.storage.errors import (
    ActionFailed,
    DeviceUnavailable,
    EnvironmentLost,
    InvalidInput,
)
from episodelake.lake.vocab.families import ParsedAction

log = logging.getLogger(__name__)

ADB_KEYBOARD_IME = "com.android.adbkeyboard/.AdbIME"
ADB_KEYBOARD_HELP = (
    "typing non-ASCII text needs the ADBKeyboard input method: download ADBKeyboard.apk from "
    "https://github.com/senzhk/ADBKeyBoard/releases, then run `adb install ADBKeyboard.apk` "
    f"and `adb shell ime enable {ADB_KEYBOARD_IME}`"
)
KEYCODES = {"back": "KEYCODE_BACK", "home": "KEYCODE_HOME", "menu": "KEYCODE_APP_SWITCH",
            "enter": "KEYCODE_ENTER"}
#: Labels of common apps (lower case) and their packages on stock Android / Pixel phones.
COMMON_APPS = {
    "settings": "com.android.settings",
    "chrome": "com.android.chrome",
    "clock": "com.google.android.deskclock",
    "camera": "com.android.camera2",
    "contacts": "com.google.android.contacts",
    "phone": "com.google.android.dialer",
    "messages": "com.google.android.apps.messaging",
    "gmail": "com.google.android.gm",
    "maps": "com.google.android.apps.maps",
    "youtube": "com.google.android.youtube",
    "play store": "com.android.vending",
    "files": "com.google.android.documentsui",
    "calendar": "com.google.android.calendar",
    "photos": "com.google.android.apps.photos",
    "calculator": "com.google.android.calculator",
}
#: Actions placed on the screen: they need its current size and rotation.
POINTED = frozenset({"click", "double_tap", "long_press", "swipe", "drag"})
_PACKAGE = re.compile(r"^[A-Za-z][\w]*(\.[A-Za-z][\w]*)+$")
#: Output of `input`/`monkey` that means the command did not do what it was asked.
_FAILURE_WORDS = ("Exception", "Error:", "monkey aborted", "Unknown command")

#: What to do about a device adb lists in a state other than ``device``.
STATE_HELP = {
    "offline": "is offline: replug the cable or run `adb reconnect offline`, then check `adb devices`",
    "unauthorized": "has not authorized this computer: unlock the phone, accept the 'Allow USB "
                    "debugging?' prompt (tick 'Always allow'), then retry",
    "authorizing": "is still authorizing: wait a few seconds and retry",
    "connecting": "is still connecting: wait a few seconds and retry",
    "no": "cannot be opened by this user (no permissions): add a udev rule for the phone's USB "
          "vendor id (https://developer.android.com/studio/run/device) and replug it",
    "recovery": "is in recovery mode: boot it normally",
    "bootloader": "is in bootloader mode: boot it normally",
    "sideload": "is in sideload mode: boot it normally",
}


@dataclass(frozen=True)
class Motion:
    """Gesture timings and sizes, close to the reference server's defaults."""

    long_press_ms: int = 1000
    swipe_ms: int = 400
    drag_ms: int = 1500
    #: A swipe travels this fraction of the screen's extent along its direction.
    swipe_distance: float = 0.3
    wait_s: float = 1.0


class ShellDevice(Protocol):
    """The part of `adbutils.AdbDevice` used here (tests pass stand-ins)."""

    serial: str | None

    def shell(self, cmdargs: Any, stream: bool = False, timeout: float | None = ...,
              encoding: str | None = "utf-8", rstrip: bool = True) -> Any: ...


# --- command construction (pure) ------------------------------------------------------------

def action_commands(action: ParsedAction, screen: Screen | None, motion: Motion = Motion(),
                    package: str | None = None) -> list[list[str]]:
    """The shell argv lists that carry out a valid action on `screen`.

    `screen` is needed by the actions in :data:`POINTED`; `package` is the resolved package
    of an ``open`` action. Text that ``input text`` cannot type is an :class:`ActionFailed`
    here; :func:`ime_text_commands` types it instead.
    """
    kind, args = action.action_type, action.action
    if kind in POINTED and screen is None:
        raise InvalidInput(f"{kind}: needs the screen size to place its points")

    def pixel(x: float, y: float) -> tuple[int, int]:
        assert screen is not None  # checked above for every pointed action
        return screen.pixel(x, y)

    if kind in ("click", "double_tap"):
        x, y = pixel(*action.point())
        return [["input", "tap", str(x), str(y)]] * (2 if kind == "double_tap" else 1)
    if kind == "long_press":
        x, y = pixel(*action.point())
        return [["input", "swipe", str(x), str(y), str(x), str(y), str(motion.long_press_ms)]]
    if kind == "swipe":
        start = action.point() if action.x is not None else (0.5, 0.5)
        end = swipe_end(start, args["direction"], motion.swipe_distance)
        (sx, sy), (ex, ey) = pixel(*start), pixel(*end)
        return [["input", "swipe", str(sx), str(sy), str(ex), str(ey), str(motion.swipe_ms)]]
    if kind == "drag":
        sx, sy = pixel(*action.point())
        ex, ey = pixel(*action.end_point())
        return [["input", "draganddrop", str(sx), str(sy), str(ex), str(ey), str(motion.drag_ms)]]
    if kind == "type":
        return input_text_commands(args["text"])
    if kind == "system_button":
        return [["input", "keyevent", KEYCODES[args["button"]]]]
    if kind == "open":
        if package is None:
            raise InvalidInput("open: resolve the app's package first (AdbDevice.resolve_package)")
        return [["monkey", "-p", package, "-c", "android.intent.category.LAUNCHER", "1"]]
    if kind in ("wait", "terminate", "answer"):
        return []
    raise InvalidInput(f"no adb command for action type {kind!r}")


def swipe_end(start: tuple[float, float], direction: str, distance: float) -> tuple[float, float]:
    """Where a finger starting at `start` (fractions) ends after moving `distance` of the
    screen in `direction` (the direction the finger moves), kept on the screen."""
    dx, dy = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}[direction]
    return (min(max(start[0] + dx * distance, 0.0), 1.0),
            min(max(start[1] + dy * distance, 0.0), 1.0))


def can_input_text(text: str) -> bool:
    """Whether ``input text`` can type `text`: printable ASCII (and newlines, sent as ENTER)."""
    return all(32 <= ord(c) < 127 or c == "\n" for c in text) and "%s" not in text


def input_text_commands(text: str) -> list[list[str]]:
    """``input text`` lines for ASCII text; a newline becomes an ENTER key press."""
    if not can_input_text(text):
        raise ActionFailed(f"cannot type {text!r} with `input text`; {ADB_KEYBOARD_HELP}")
    commands: list[list[str]] = []
    for i, line in enumerate(text.split("\n")):
        if i:
            commands.append(["input", "keyevent", KEYCODES["enter"]])
        if line:
            commands.append(["input", "text", line.replace(" ", "%s")])
    return commands


def ime_text_commands(text: str) -> list[list[str]]:
    """The ADBKeyboard broadcast that types any Unicode `text` (the IME must be selected)."""
    encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return [["am", "broadcast", "-a", "ADB_INPUT_B64", "--es", "msg", encoded]]


def parse_wm_size(output: str) -> tuple[int, int]:
    """(width, height) in the natural orientation from ``wm size``; an override wins."""
    for label in ("Override size", "Physical size"):
        m = re.search(rf"{label}:\s*(\d+)x(\d+)", output)
        if m:
            return int(m.group(1)), int(m.group(2))
    raise EnvironmentLost(f"`wm size` gave no screen size: {output.strip()[:200]!r}")


def parse_rotation(output: str) -> int | None:
    """Quarter turns from ``dumpsys input`` (SurfaceOrientation) or ``dumpsys display``."""
    m = re.search(r"SurfaceOrientation:\s*(\d)", output) or re.search(r"\borientation=(\d)", output)
    return int(m.group(1)) if m else None


def oriented(natural: tuple[int, int], rotation: int) -> Screen:
    """The screen as seen at `rotation`: width and height swap in landscape."""
    w, h = natural
    return Screen(h, w, rotation) if rotation % 2 else Screen(w, h, rotation)


# --- finding devices --------------------------------------------------------------------------

@dataclass(frozen=True)
class AttachedDevice:
    serial: str
    state: str
    model: str | None = None

    @property
    def ready(self) -> bool:
        return self.state == "device"

    def problem(self) -> str:
        help_text = STATE_HELP.get(self.state, f"is in state {self.state!r}")
        return f"device {self.serial} {help_text}"


def _client(client: Any | None) -> Any:
    if client is not None:
        return client
    import adbutils

    return adbutils.AdbClient()


def list_devices(client: Any | None = None) -> list[AttachedDevice]:
    """Every device the adb server knows, in whatever state."""
    client = _client(client)
    try:
        infos = client.list(extended=True)
    except Exception as exc:  # adbutils raises AdbError/AdbTimeout, sockets raise OSError
        raise DeviceUnavailable(
            f"cannot reach the adb server at {client.host}:{client.port} ({exc}): start it with "
            "`adb start-server` (or set ANDROID_ADB_SERVER_PORT to the port it listens on)"
        ) from None
    return [AttachedDevice(i.serial, i.state, i.tags.get("model")) for i in infos]


def ready_serials(client: Any | None = None) -> list[str]:
    """Serials of the devices that can be driven now; an error says why when there are none."""
    devices = list_devices(client)
    if not devices:
        raise DeviceUnavailable(
            "no Android device is attached: connect one with USB debugging on (Settings > "
            "Developer options), or `adb connect HOST:PORT` for one over Wi-Fi, then check "
            "`adb devices`")
    ready = [d.serial for d in devices if d.ready]
    if not ready:
        raise DeviceUnavailable("; ".join(d.problem() for d in devices))
    return ready


def connect(serial: str | None = None, *, client: Any | None = None, **options: Any) -> AdbDevice:
    """An :class:`AdbDevice` for `serial`, or for the only ready device when None."""
    client = _client(client)
    devices = list_devices(client)
    if serial is None:
        ready = ready_serials(client)
        if len(ready) > 1:
            raise DeviceUnavailable(
                f"{len(ready)} devices are attached ({', '.join(ready)}): pass --serial SERIAL, "
                "or --all to collect on each")
        serial = ready[0]
    found = next((d for d in devices if d.serial == serial), None)
    if found is None:
        attached = ", ".join(f"{d.serial} ({d.state})" for d in devices) or "none"
        raise DeviceUnavailable(f"device {serial} is not attached (attached: {attached}); "
                                "check the serial with `adb devices`")
    if not found.ready:
        raise DeviceUnavailable(found.problem())
    return AdbDevice(client.device(serial), **options)


# --- the device -------------------------------------------------------------------------------

class AdbDevice(Device):
    """One phone over adb. With `dry_run` it reads the screen but never sends input: every
    action's commands are returned (and stored in the step's info) instead of run."""

    env = "adb"

    def __init__(self, device: ShellDevice, *, dry_run: bool = False, with_ui_tree: bool = False,
                 motion: Motion = Motion(), apps: Mapping[str, str] | None = None,
                 timeout_s: float = 30.0):
        self._device = device
        self.dry_run = dry_run
        self.with_ui_tree = with_ui_tree
        self.motion = motion
        self.apps = {**COMMON_APPS, **{k.lower(): v for k, v in (apps or {}).items()}}
        self.timeout_s = timeout_s
        self._natural: tuple[int, int] | None = None
        self._has_ime: bool | None = None

    @property
    def name(self) -> str:
        return self._device.serial or "adb"

    def shell(self, argv: list[str] | str, *, binary: bool = False) -> Any:
        """Run one shell command; a dead connection is EnvironmentLost, naming the command."""
        try:
            return self._device.shell(argv, timeout=self.timeout_s,
                                      encoding=None if binary else "utf-8")
        except Exception as exc:  # adbutils.AdbError/AdbTimeout or a socket OSError
            shown = argv if isinstance(argv, str) else " ".join(argv)
            raise EnvironmentLost(
                f"adb shell `{shown}` failed on {self.name}: {exc}; check the cable and "
                "`adb devices`") from None

    def screen(self) -> Screen:
        if self._natural is None:
            self._natural = parse_wm_size(self.shell(["wm", "size"]))
        rotation = parse_rotation(self.shell("dumpsys input | grep -m1 SurfaceOrientation"))
        if rotation is None:
            rotation = parse_rotation(self.shell("dumpsys display | grep -m1 orientation="))
        if rotation is None:
            raise EnvironmentLost(f"cannot read the screen rotation of {self.name} from dumpsys")
        return oriented(self._natural, rotation)

    def screenshot(self) -> bytes:
        data = self.shell(["screencap", "-p"], binary=True)
        if not data.startswith(b"\x89PNG\r\n\x1a\n"):
            raise EnvironmentLost(
                f"`screencap -p` on {self.name} returned {len(data)} bytes that are not a PNG "
                f"(starting {data[:16]!r}); is the screen locked by a secure window?")
        return data

    def ui_tree(self) -> str | None:
        if not self.with_ui_tree:
            return None
        path = "/data/local/tmp/elake_window_dump.xml"
        out = self.shell(f"uiautomator dump {path} >/dev/null && cat {path}")
        if not out.lstrip().startswith("<?xml"):
            # uiautomator fails while the screen animates; the step is kept without a tree
            log.warning("uiautomator dump on %s gave no XML (%r); step stored without a UI tree",
                        self.name, out[:120])
            return None
        return out

    def resolve_package(self, app: str) -> str:
        """The package to launch for an app label or package name."""
        if _PACKAGE.match(app):
            return app
        known = self.apps.get(app.strip().lower())
        if known:
            return known
        needle = re.sub(r"\W+", "", app.lower())
        packages = [line.removeprefix("package:").strip()
                    for line in self.shell(["pm", "list", "packages"]).splitlines()]
        hits = [p for p in packages if needle and needle in re.sub(r"\W+", "", p.lower())]
        if len(hits) == 1:
            return hits[0]
        found = f"candidates: {', '.join(hits[:8])}" if hits else "no installed package matches"
        raise ActionFailed(f"cannot tell which app {app!r} is ({found}); add it to an apps file "
                           "({\"label\": \"package\"}) passed with --apps")

    def execute(self, action: ParsedAction) -> ActionResult:
        kind = action.action_type
        if kind == "type" and not can_input_text(action.action["text"]):
            commands = ime_text_commands(action.action["text"])
            return self._run(commands, ime=True)
        package = self.resolve_package(action.action["text"]) if kind == "open" else None
        screen = self.screen() if kind in POINTED else None
        commands = action_commands(action, screen, self.motion, package)
        if kind == "wait" and not self.dry_run:
            time.sleep(self.motion.wait_s)
        result = {"terminate": action.action.get("status", ""), "wait": "OK", "answer": "OK"}
        return self._run(commands, result=result.get(kind, ""))

    def _run(self, commands: list[list[str]], *, ime: bool = False, result: str = "") -> ActionResult:
        if self.dry_run:
            return ActionResult(result, commands, dry_run=True)
        if ime:
            return ActionResult(result, self._type_with_ime(commands))
        for argv in commands:
            out = self.shell(argv)
            if any(word in out for word in _FAILURE_WORDS):
                raise ActionFailed(f"`{' '.join(argv)}` failed on {self.name}: {out.strip()[:300]}")
        return ActionResult(result, commands)

    def _type_with_ime(self, commands: list[list[str]]) -> list[list[str]]:
        """Select ADBKeyboard, broadcast the text, then give back the user's keyboard."""
        if self._has_ime is None:
            self._has_ime = ADB_KEYBOARD_IME in self.shell(["ime", "list", "-s"]).split()
        if not self._has_ime:
            raise ActionFailed(f"{self.name}: {ADB_KEYBOARD_HELP}")
        previous = self.shell(["settings", "get", "secure", "default_input_method"]).strip()
        ran = [["ime", "set", ADB_KEYBOARD_IME], *commands]
        if previous and previous != ADB_KEYBOARD_IME:
            ran.append(["ime", "set", previous])
        for argv in ran:
            self.shell(argv)
        return ran


# --- the device kind: `elake collect adb`, `elake rerun --env adb` ---------------------------

@dataclass(frozen=True)
class AdbSpec:
    """A phone over adb, opened where the worker runs (None: the only one attached)."""

    serial: str | None = None
    dry_run: bool = False
    with_ui_tree: bool = False
    apps: dict[str, str] = field(default_factory=dict)

    def open(self) -> Device:
        return connect(self.serial, dry_run=self.dry_run, with_ui_tree=self.with_ui_tree, apps=self.apps)


def _collection(values: dict[str, Any]) -> Collection:
    if values["list_phones"]:
        return Collection(lines=tuple(
            f"{d.serial}\t{d.state}\t{d.model or ''}\t{'ready' if d.ready else d.problem()}"
            for d in list_devices()))
    apps: dict[str, str] = {}
    if values["apps"]:
        try:
            apps = json.loads(Path(values["apps"]).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"--apps {values['apps']}: {exc}") from None
    serials = ready_serials() if values["all_phones"] else [values["serial"]]
    dry_run = values["dry_run"]
    return Collection([AdbSpec(s, dry_run, values["ui_tree"], apps) for s in serials],
                      tags=("dry-run",) if dry_run else ())


def _rerun_spec(target: RerunTarget) -> AdbSpec:
    return AdbSpec(target.serial)


DEVICE = DeviceKind(
    name="adb", summary="a real Android phone over adb", doc=__doc__,
    description="Drive phones attached over adb (USB or `adb connect`). --dry-run reads the screen "
    "and records what would be sent, sending nothing.",
    options=(
        DeviceOption("serial", str | None, "the phone's serial (`adb devices`); default: the only one"),
        DeviceOption("all_phones", bool, "one collector per ready phone", False, flag="--all"),
        DeviceOption("list_phones", bool, "list attached phones and their state", False, flag="--list"),
        DeviceOption("dry_run", bool, "never send input to the phone", False, flag="--dry-run"),
        DeviceOption("ui_tree", bool, "store a uiautomator dump with each step", False, flag="--ui-tree"),
        DeviceOption("apps", Path | None, 'JSON file {"app label": "package"} for `open`'),
    ),
    task_help="the goal, in words (repeatable)",
    collect=_collection,
    exclusive=(Exclusive(("serial", "all_phones", "list_phones")),),
    rerun=RerunDevice("adb", _rerun_spec),
)
