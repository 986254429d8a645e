"""Settings tasks: switches (Wi-Fi, Bluetooth, airplane mode, dark theme, Do Not Disturb),
sliders (brightness, ring volume) and joining a Wi-Fi network."""

from __future__ import annotations

from episodelake.collectors.envs.sim import catalog
from episodelake.collectors.envs.sim import navigation as nav
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import PhoneState
from episodelake.collectors.envs.sim.tasks.base import Params, Template, grid

SETTINGS_MAIN = [nav.Hop("main")]
NETWORK = [*SETTINGS_MAIN, nav.Hop("network", "network")]
WIFI_PAGE = [*NETWORK, nav.Hop("wifi", "wifi")]
DEVICES = [*SETTINGS_MAIN, nav.Hop("devices", "devices")]
DISPLAY = [*SETTINGS_MAIN, nav.Hop("display", "display")]
SOUND = [*SETTINGS_MAIN, nav.Hop("sound", "sound")]
ON_OFF = ["on", "off"]


def _toggle_task(attribute: str, switches: tuple[str, ...], path: list[nav.Hop], on: bool | None = None):
    """check/solve/setup for a settings switch; ``on`` fixed, or taken from the ``state`` param."""

    def wanted(params: Params) -> bool:
        return on if on is not None else params["state"] == "on"

    def check(state: PhoneState, params: Params) -> bool:
        return getattr(state.settings, attribute) == wanted(params)

    def solve(phone: Phone, params: Params) -> nav.Action | None:
        if phone.state.foreground == "settings" and any(nav.find(phone, name) for name in switches):
            return nav.set_switch(phone, switches, wanted(params))
        return nav.navigate(phone, "settings", path)

    def setup(state: PhoneState, params: Params) -> None:
        value = not wanted(params)
        setattr(state.settings, attribute, value)
        if attribute == "airplane" and value:
            state.settings.wifi = state.settings.bluetooth = False
        if attribute in ("wifi", "bluetooth"):
            state.settings.airplane = False

    return {"check": check, "solve": solve, "setup": setup}


def _slider_task(attribute: str, slider: str, path: list[nav.Hop]):
    def check(state: PhoneState, params: Params) -> bool:
        return getattr(state.settings, attribute) == int(params["level"])

    def solve(phone: Phone, params: Params) -> nav.Action | None:
        if phone.state.foreground == "settings" and nav.find(phone, slider) is not None:
            return nav.set_slider(phone, slider, int(params["level"]))
        return nav.navigate(phone, "settings", path)

    return {"check": check, "solve": solve}


def _wifi_connect_check(state: PhoneState, params: Params) -> bool:
    return state.settings.wifi and state.settings.wifi_network == params["network"]


def _wifi_connect_solve(phone: Phone, params: Params) -> nav.Action | None:
    if nav.is_on(phone, "settings", "wifi"):
        slug = params["network"].lower().replace("-", "_")
        return nav.set_switch(phone, ("wifi_master",), True) or nav.press(phone, f"network_{slug}")
    return nav.navigate(phone, "settings", WIFI_PAGE)


def _wifi_connect_setup(state: PhoneState, params: Params) -> None:
    state.settings.wifi, state.settings.airplane, state.settings.wifi_network = True, False, "HomeNet"


WIFI_SWITCHES = ("wifi_switch", "wifi_master")
BLUETOOTH_SWITCHES = ("bluetooth_switch", "bluetooth_master")

TEMPLATES = [
    Template("wifi_on", "Turn on Wi-Fi.", "easy", **_toggle_task("wifi", WIFI_SWITCHES, NETWORK, on=True)),
    Template("wifi_off", "Turn off Wi-Fi.", "easy", **_toggle_task("wifi", WIFI_SWITCHES, NETWORK, on=False)),
    Template("bluetooth_on", "Turn on Bluetooth.", "easy",
             **_toggle_task("bluetooth", BLUETOOTH_SWITCHES, DEVICES, on=True)),
    Template("bluetooth_off", "Turn off Bluetooth.", "easy",
             **_toggle_task("bluetooth", BLUETOOTH_SWITCHES, DEVICES, on=False)),
    Template("airplane_mode", "Turn airplane mode {state}.", "easy", grid=grid(state=ON_OFF),
             **_toggle_task("airplane", ("airplane_switch",), NETWORK)),
    Template("dark_mode", "Turn the dark theme {state}.", "easy", grid=grid(state=ON_OFF),
             **_toggle_task("dark", ("dark_theme_switch",), DISPLAY)),
    Template("do_not_disturb", "Turn Do Not Disturb {state}.", "easy", grid=grid(state=ON_OFF),
             **_toggle_task("dnd", ("dnd_switch",), SOUND)),
    Template("brightness_set", "Set the screen brightness to {level}%.", "medium",
             grid=grid(level=[str(v) for v in range(0, 101, 10) if v != 60]),
             **_slider_task("brightness", "brightness", DISPLAY)),
    Template("ring_volume_set", "Set the ring volume to {level}%.", "medium",
             grid=grid(level=["0", "20", "40", "50", "60", "80", "100"]),
             **_slider_task("ring_volume", "ring_volume", SOUND)),
    Template("wifi_connect", "Connect to the Wi-Fi network {network}.", "medium", _wifi_connect_check,
             _wifi_connect_solve, grid(network=[n for n in catalog.WIFI_NETWORKS if n != "HomeNet"]),
             _wifi_connect_setup),
]
