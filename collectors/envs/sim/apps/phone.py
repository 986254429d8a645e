"""Phone (dialer): keypad, recent calls, contacts to call, and the in-call screen.

The keypad's number takes typed text without a keyboard, as a dialer's digits field does,
so ``type`` works there with nothing focused.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from episodelake.collectors.envs.sim.apps.kit import avatar_color, contact_rows
from episodelake.collectors.envs.sim.geometry import CONTENT_TOP, STATUS_BAR_H, WIDTH, Rect
from episodelake.collectors.envs.sim.state import Contact, PhoneState
from episodelake.collectors.envs.sim.widgets import TEXT_SMALL, UI, Widget

PACKAGE = "com.google.android.dialer"

KEYS = ("1", "2", "3", "4", "5", "6", "7", "8", "9", "*", "0", "#")
KEY_LETTERS = {"2": "ABC", "3": "DEF", "4": "GHI", "5": "JKL", "6": "MNO", "7": "PQRS", "8": "TUV",
               "9": "WXYZ", "0": "+"}
KEY_NAMES = {"*": "star", "#": "pound"}
TABS = (("tab_recents", "Recents", "recents"), ("tab_contacts", "Contacts", "contacts"),
        ("tab_keypad", "Keypad", "main"))


# --- handlers ------------------------------------------------------------------------------

def _switch_tab(screen: str, state: PhoneState) -> None:
    state.replace(screen)


def _press(key: str, state: PhoneState) -> None:
    route = state.route
    assert route is not None
    route.fields["number"] = (route.fields.get("number", "") + key)[:20]


def _backspace(state: PhoneState) -> None:
    route = state.route
    assert route is not None
    route.fields["number"] = route.fields.get("number", "")[:-1]


def _dial(state: PhoneState) -> None:
    route = state.route
    assert route is not None
    number = route.fields.get("number", "").strip()
    if not number:
        state.toast = "Enter a number"
        return
    route.fields["number"] = ""
    state.start_call(number)


def _call(number: str, state: PhoneState) -> None:
    state.start_call(number)


def _call_contact(contact: Contact, state: PhoneState) -> None:
    state.start_call(contact.phone)


def _hang_up(state: PhoneState) -> None:
    state.active_call = None
    state.back()


# --- screens -------------------------------------------------------------------------------

def _keypad(ui: UI) -> None:
    number = ui.make_field(Rect(100, CONTENT_TOP + 40, WIDTH - 220, CONTENT_TOP + 220), "number", "",
                           keyboard=False, clearable=False, max_length=20)
    number.role = "dial_display"
    number.size = 100
    number.align = "center"
    ui.add(number)
    ui.screen.default_field = "number"
    ui.icon_button(Rect(WIDTH - 200, CONTENT_TOP + 70, WIDTH - 80, CONTENT_TOP + 190), "backspace",
                   "backspace", "Backspace", _backspace)
    top, key_w, key_h = CONTENT_TOP + 300, 300, 230
    for i, key in enumerate(KEYS):
        row, col = divmod(i, 3)
        left = 90 + col * key_w
        y = top + row * key_h
        button = ui.add(Widget("key", Rect(left + 20, y + 10, left + key_w - 20, y + key_h - 10),
                               rid=ui.rid(f"dialpad_{KEY_NAMES.get(key, key)}"), text=key, desc=key, size=90,
                               align="center", role="dial_key", on_click=partial(_press, key)))
        if key in KEY_LETTERS:
            button.children.append(Widget("text", Rect(left, y + 150, left + key_w, y + 200),
                                          text=KEY_LETTERS[key], size=30, align="center", role="muted"))
    y = top + 4 * key_h + 30
    ui.add(Widget("fab", Rect(WIDTH // 2 - 110, y, WIDTH // 2 + 110, y + 220), rid=ui.rid("dial_button"),
                  desc="Call", glyph="call", role="call", on_click=_dial))


def _recents(ui: UI) -> None:
    state = ui.state
    lst = ui.list_view("call_log")
    for i, call in reversed(list(enumerate(state.calls))):
        contact = state.contact_for_number(call.number)
        name = contact.name if contact else call.number
        call_back = Widget("icon_button", Rect(0, 0, 130, 130), rid=ui.rid(f"call_back_{i}"), desc=f"Call {name}",
                           glyph="call", on_click=partial(_call, call.number))
        lst.row(name, name=f"call_{i}", subtitle="Outgoing" if call.outgoing else "Incoming",
                avatar=name[0], avatar_color=avatar_color(name), trailing=call_back, height=180)
    lst.done()


def _contacts(ui: UI) -> None:
    lst = ui.list_view("dialer_contacts")
    contact_rows(lst, ui.state.contacts, "dial", lambda c: partial(_call_contact, c))
    lst.done()


def _in_call(ui: UI) -> None:
    route = ui.route
    assert route is not None
    contact = ui.state.contact_for_number(route.arg)
    name = contact.name if contact else route.arg
    ui.screen.title = f"Call with {name}"
    active = ui.state.active_call == route.arg
    ui.add(Widget("frame", Rect(0, STATUS_BAR_H, WIDTH, ui.bottom), role="call_background"))
    ui.add(Widget("avatar", Rect(WIDTH // 2 - 170, 400, WIDTH // 2 + 170, 740), text=name[0] if contact else "",
                  glyph="contacts", color=avatar_color(name), size=160))
    ui.text(Rect(60, 800, WIDTH - 60, 900), name, name="contact_name", size=80, align="center",
            role="on_dark")
    ui.text(Rect(60, 920, WIDTH - 60, 990), route.arg if contact else "Mobile", size=TEXT_SMALL,
            align="center", role="on_dark")
    ui.text(Rect(60, 1010, WIDTH - 60, 1080), "Calling..." if active else "Call ended", name="call_state",
            size=TEXT_SMALL, align="center", role="on_dark")
    ui.label("call", f"{name}:{'active' if active else 'ended'}")
    if active:
        ui.add(Widget("fab", Rect(WIDTH // 2 - 120, 1800, WIDTH // 2 + 120, 2040), rid=ui.rid("end_call"),
                      desc="End call", glyph="call_end", role="danger", on_click=_hang_up))


def _tab(body: Callable[[UI], None], ui: UI) -> None:
    """A tab's screen: the app bar and tab row, swipes to the neighbouring tabs, then `body`."""
    route = ui.route
    assert route is not None
    ui.app_bar(next(text for _, text, screen in TABS if screen == route.screen))
    ui.tabs([(name, text, route.screen == screen, partial(_switch_tab, screen)) for name, text, screen in TABS])
    order = [screen for _, _, screen in TABS]
    index = order.index(route.screen)
    if index + 1 < len(order):
        ui.screen.swipes["left"] = partial(_switch_tab, order[index + 1])
    if index > 0:
        ui.screen.swipes["right"] = partial(_switch_tab, order[index - 1])
    body(ui)


#: The app's screens by route name, each laying its screen out.
SCREENS: dict[str, Callable[[UI], None]] = {
    "main": partial(_tab, _keypad), "recents": partial(_tab, _recents), "contacts": partial(_tab, _contacts),
    "call": _in_call,
}
