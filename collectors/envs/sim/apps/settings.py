"""Settings: radios (Wi-Fi, Bluetooth, airplane mode), display and sound.

Distractors a grounding error can hit: "Wi-Fi calling" right under "Wi-Fi", "NFC" under
"Bluetooth", "Adaptive brightness" next to the brightness slider, "Media volume" under
"Ring volume". Wi-Fi and Bluetooth rows are split like Android's: the switch flips the radio,
the rest of the row opens its page.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from episodelake.collectors.envs.sim import catalog
from episodelake.collectors.envs.sim.apps.kit import toggle_row
from episodelake.collectors.envs.sim.geometry import WIDTH, Rect
from episodelake.collectors.envs.sim.state import PhoneState
from episodelake.collectors.envs.sim.widgets import TEXT_BODY, TEXT_SMALL, UI, ListBuilder, Widget

PACKAGE = "com.android.settings"

#: Rows of the main page: (id, title, subtitle, glyph, screen it opens).
MAIN_ROWS = (
    ("network", "Network & internet", "Wi-Fi, mobile data, hotspot", "wifi", "network"),
    ("devices", "Connected devices", "Bluetooth, NFC", "bluetooth", "devices"),
    ("display", "Display", "Dark theme, brightness", "display", "display"),
    ("sound", "Sound & vibration", "Volume, Do Not Disturb", "sound", "sound"),
    ("notifications", "Notifications", "App notifications, history", "bell", "info"),
    ("battery", "Battery", "Battery saver, usage", "battery", "info"),
    ("apps", "Apps", "Recent apps, default apps", "apps", "info"),
    ("storage", "Storage", "64 GB total", "storage", "info"),
    ("security", "Security & privacy", "Screen lock, face unlock", "lock", "info"),
    ("about", "About phone", "Pixel 8", "info", "info"),
)

#: Static pages: title and (label, value) rows.
INFO_PAGES = {
    "notifications": ("Notifications", (("App notifications", "On for 23 apps"),
                                        ("Notification history", "Off"))),
    "battery": ("Battery", (("Battery saver", "Off"), ("Battery usage", "Since last full charge"))),
    "apps": ("Apps", (("Default apps", "Chrome, Messages"), ("App permissions", "Camera, Location"))),
    "storage": ("Storage", (("System", "12 GB"), ("Apps", "9.4 GB"), ("Images", "3.1 GB"))),
    "security": ("Security & privacy", (("Screen lock", "PIN"), ("Face unlock", "Not set up"))),
    "about": ("About phone", (("Device name", "Pixel 8"), ("Android version", "14"),
                              ("Build number", "UQ1A.240205.004"))),
    "hotspot": ("Hotspot & tethering", (("Wi-Fi hotspot", "Off"), ("USB tethering", "Off"))),
    "timeout": ("Screen timeout", (("Current", "30 seconds"),)),
}


# --- handlers ------------------------------------------------------------------------------

def _flip(name: str, state: PhoneState) -> None:
    setattr(state.settings, name, not getattr(state.settings, name))


def _flip_airplane(state: PhoneState) -> None:
    """Airplane mode switches the radios off; they can be switched on again by hand."""
    state.settings.airplane = not state.settings.airplane
    if state.settings.airplane:
        state.settings.wifi = False
        state.settings.bluetooth = False


def _set(name: str, state: PhoneState, value: int) -> None:
    setattr(state.settings, name, value)


def _open(screen: str, arg: str, state: PhoneState) -> None:
    state.push("settings", screen, arg)


def _connect(network: str, state: PhoneState) -> None:
    state.settings.wifi_network = network


# --- screens -------------------------------------------------------------------------------

def _main(ui: UI) -> None:
    ui.app_bar("Settings")
    lst = ui.list_view("settings_list")
    for name, title, subtitle, glyph, screen in MAIN_ROWS:
        arg = name if screen == "info" else ""
        lst.row(title, name=name, subtitle=subtitle, glyph=glyph, height=200,
                on_click=partial(_open, screen, arg))
    lst.done()


def _network(ui: UI) -> None:
    s = ui.state.settings
    lst = _page(ui, "Network & internet", "network_list")
    _radio_row(lst, "Wi-Fi", "wifi", s.wifi_network if s.wifi else "Off")
    toggle_row(lst, "Wi-Fi calling", "wifi_calling", s.wifi_calling, partial(_flip, "wifi_calling"),
               subtitle="Call over Wi-Fi when available", glyph="call")
    toggle_row(lst, "Mobile data", "mobile_data", s.mobile_data, partial(_flip, "mobile_data"),
               subtitle="T-Mobile" if s.mobile_data else "Off", glyph="signal")
    toggle_row(lst, "Airplane mode", "airplane", s.airplane, _flip_airplane, glyph="airplane")
    lst.row("Hotspot & tethering", name="hotspot", subtitle="Off", glyph="hotspot",
            on_click=partial(_open, "info", "hotspot"), height=200)
    lst.done()


def _wifi(ui: UI) -> None:
    s = ui.state.settings
    lst = _radio_page(ui, "Wi-Fi", "wifi", "To see available networks, turn Wi-Fi on.")
    if s.wifi:
        lst.header("Connected")
        lst.row(s.wifi_network, name="network_connected", subtitle="Connected", glyph="wifi", height=180)
        lst.header("Available networks")
        for network in catalog.WIFI_NETWORKS:
            if network != s.wifi_network:
                lst.row(network, name=f"network_{network.lower().replace('-', '_')}", subtitle="Saved",
                        glyph="wifi", on_click=partial(_connect, network), height=180)
    lst.done()


def _devices(ui: UI) -> None:
    s = ui.state.settings
    lst = _page(ui, "Connected devices", "devices_list")
    _radio_row(lst, "Bluetooth", "bluetooth", "On" if s.bluetooth else "Off")
    toggle_row(lst, "NFC", "nfc", s.nfc, partial(_flip, "nfc"), subtitle="Tap to pay", glyph="nfc")
    lst.row("Pair new device", name="pair_new", glyph="plus", on_click=partial(_open, "bluetooth", ""),
            height=200)
    lst.done()


def _bluetooth(ui: UI) -> None:
    lst = _radio_page(ui, "Bluetooth", "bluetooth", "Turn on Bluetooth to connect to nearby devices.")
    if ui.state.settings.bluetooth:
        lst.header("Paired devices")
        for device in catalog.PAIRED_DEVICES:
            lst.row(device, name=f"device_{device.lower().replace(' ', '_')}", subtitle="Saved",
                    glyph="bluetooth", height=180)
    lst.done()


def _display(ui: UI) -> None:
    s = ui.state.settings
    lst = _page(ui, "Display", "display_list")
    lst.header("Brightness")
    _slider_item(lst, "Brightness level", "brightness", s.brightness, partial(_set, "brightness"))
    toggle_row(lst, "Adaptive brightness", "adaptive_brightness", s.adaptive_brightness,
               partial(_flip, "adaptive_brightness"), subtitle="Adjust to the light around you")
    lst.header("Appearance")
    toggle_row(lst, "Dark theme", "dark_theme", s.dark, partial(_flip, "dark"),
               subtitle="Use a dark background", glyph="moon")
    lst.row("Screen timeout", name="timeout", subtitle="30 seconds", on_click=partial(_open, "info", "timeout"),
            height=200)
    lst.done()


def _sound(ui: UI) -> None:
    s = ui.state.settings
    lst = _page(ui, "Sound & vibration", "sound_list")
    _slider_item(lst, "Ring volume", "ring_volume", s.ring_volume, partial(_set, "ring_volume"))
    _slider_item(lst, "Media volume", "media_volume", s.media_volume, partial(_set, "media_volume"))
    toggle_row(lst, "Do Not Disturb", "dnd", s.dnd, partial(_flip, "dnd"), subtitle="Silence notifications",
               glyph="moon")
    toggle_row(lst, "Vibrate for calls", "vibrate", s.vibrate, partial(_flip, "vibrate"))
    lst.done()


def _info(ui: UI) -> None:
    assert ui.route is not None
    title, rows = INFO_PAGES[ui.route.arg]
    lst = _page(ui, title, "info_list")
    for label, value in rows:
        lst.row(label, name="", subtitle=value, height=200)
    lst.done()


# --- pieces --------------------------------------------------------------------------------

def _page(ui: UI, title: str, list_name: str) -> ListBuilder:
    """A page below the main one: its app bar with a back arrow, and its list."""
    ui.app_bar(title, back=PhoneState.back)
    return ui.list_view(list_name)


def _radio_row(lst: ListBuilder, title: str, radio: str, subtitle: str) -> None:
    """A radio's row, split like Android's: the switch flips the radio, the rest of the row
    opens the radio's page."""
    on = getattr(lst.ui.state.settings, radio)
    switch = lst.ui.switch(Rect(0, 0, 150, 84), f"{radio}_switch", on, partial(_flip, radio))
    lst.row(title, name=radio, subtitle=subtitle, glyph=radio, on_click=partial(_open, radio, ""),
            trailing=switch, height=200)


def _radio_page(ui: UI, title: str, radio: str, off_text: str) -> ListBuilder:
    """A radio's page: its master switch, then (the caller's rows, while it is on) or
    `off_text`."""
    on = getattr(ui.state.settings, radio)
    lst = _page(ui, title, f"{radio}_list")
    _master(lst, f"Use {title}", f"{radio}_master", on, partial(_flip, radio))
    if not on:
        _off_message(lst, off_text)
    return lst


def _master(lst: ListBuilder, title: str, name: str, checked: bool, toggle) -> None:
    """The highlighted on/off card at the top of a radio's page."""
    switch = lst.ui.switch(Rect(0, 0, 150, 84), name, checked, toggle)
    card = Widget("row", Rect(0, 0, WIDTH, 230), rid=lst.ui.rid(f"{name}_card"), on_click=toggle,
                  role="master_on" if checked else "master_off", desc=title)
    card.children.append(Widget("text", Rect(80, 80, 800, 150), text=title, size=54))
    switch.rect = Rect(WIDTH - 230, 73, WIDTH - 80, 157)
    switch.visible = switch.rect
    card.children.append(switch)
    lst.add(card, 260)


def _off_message(lst: ListBuilder, text: str) -> None:
    lst.add(Widget("text", Rect(80, 60, WIDTH - 80, 200), text=text, size=TEXT_BODY, role="muted"), 400)


def _slider_item(lst: ListBuilder, title: str, name: str, value: int, handler) -> None:
    item = Widget("frame", Rect(0, 0, WIDTH, 250))
    item.children.append(Widget("text", Rect(56, 30, 800, 100), text=title, size=TEXT_BODY))
    item.children.append(Widget("text", Rect(800, 30, WIDTH - 56, 100), text=f"{value}%", size=TEXT_SMALL,
                                role="muted", align="right"))
    item.children.append(Widget("slider", Rect(56, 120, WIDTH - 56, 220), rid=lst.ui.rid(name), value=value,
                                desc=title, on_set_value=handler, value_step=5))
    lst.ui.label(name, value)
    lst.add(item, 250)


#: The app's screens by route name, each laying its screen out.
SCREENS: dict[str, Callable[[UI], None]] = {
    "main": _main, "network": _network, "wifi": _wifi, "devices": _devices,
    "bluetooth": _bluetooth, "display": _display, "sound": _sound, "info": _info,
}
