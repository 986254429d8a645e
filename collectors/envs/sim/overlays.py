"""System UI drawn over every app: status bar, navigation bar, keyboard, dialogs, menus,
toasts; and the text-entry rules the keyboard and the ``type`` action share.

Resource ids follow the real packages (``com.android.systemui`` for the bars, ``android``
for dialog buttons, the Gboard package for keys) so that the accessibility dump reads like
one from a device.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from episodelake.collectors.envs.sim.geometry import (
    HEIGHT,
    KEYBOARD_TOP,
    NAV_TOP,
    STATUS_BAR_H,
    WIDTH,
    Rect,
)
from episodelake.collectors.envs.sim.state import PhoneState
from episodelake.collectors.envs.sim.widgets import (
    TEXT_BODY,
    TEXT_SMALL,
    UI,
    FieldSpec,
    Handler,
    Screen,
    Widget,
)

SYSTEM_UI = "com.android.systemui"
KEYBOARD_PACKAGE = "com.google.android.inputmethod.latin"

STATUS_BAR_ID = f"{SYSTEM_UI}:id/status_bar"
CLOCK_ID = f"{SYSTEM_UI}:id/clock"

LETTER_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
SYMBOL_ROWS = ("1234567890", "@#$%&-+()", "*\"':;!?")
KEY_NAMES = {"@": "at", "#": "hash", "$": "dollar", "%": "percent", "&": "amp", "-": "minus",
             "+": "plus", "(": "lparen", ")": "rparen", "*": "star", '"': "quote", "'": "apos",
             ":": "colon", ";": "semicolon", "!": "bang", "?": "question", ",": "comma", ".": "period"}


# --- text entry ---------------------------------------------------------------------------

def type_text(state: PhoneState, spec: FieldSpec, text: str) -> str:
    """Appends text to a field as a device's input method does; returns what was typed.

    Single-line fields drop line breaks; text beyond the field's maximum length is cut.
    """
    assert state.route is not None
    if not spec.multiline:
        text = text.replace("\n", " ")
    current = state.route.fields.get(spec.name, "")
    typed = text[: max(0, spec.max_length - len(current))]
    state.route.fields[spec.name] = current + typed
    return typed


def submit(state: PhoneState, spec: FieldSpec) -> None:
    """Enter: a new line in a multi-line field, else the field's action (search, send), else
    the keyboard closes."""
    if spec.multiline:
        type_text(state, spec, "\n")
    elif spec.on_submit is not None:
        spec.on_submit(state)
    else:
        state.focus = None


def backspace(state: PhoneState, spec: FieldSpec) -> None:
    assert state.route is not None
    state.route.fields[spec.name] = state.route.fields.get(spec.name, "")[:-1]


# --- bars -----------------------------------------------------------------------------------

def status_bar(state: PhoneState) -> Widget:
    """Clock on the left, radios and battery on the right; the only part that moves with time."""
    bar = Widget("frame", Rect(0, 0, WIDTH, STATUS_BAR_H), rid=STATUS_BAR_ID, role="status_bar")
    bar.children.append(Widget("text", Rect(48, 18, 260, 80), rid=CLOCK_ID, text=state.clock_text,
                               size=TEXT_SMALL, role="status"))
    right = WIDTH - 48
    bar.children.append(Widget("text", Rect(right - 110, 18, right, 80), rid=f"{SYSTEM_UI}:id/battery",
                               text=f"{state.battery}%", size=TEXT_SMALL, role="status", align="right"))
    right -= 130
    radios = [("airplane", "Airplane mode", state.settings.airplane),
              ("bluetooth", "Bluetooth", state.settings.bluetooth),
              ("wifi", "Wi-Fi", state.settings.wifi)]
    for glyph, desc, on in radios:
        if on:
            bar.children.append(Widget("image", Rect(right - 56, 22, right, 78), desc=desc, glyph=glyph,
                                       role="status"))
            right -= 76
    return bar


def nav_bar(screen: Screen) -> Widget:
    """Three-button navigation; back and home act like the system_button action."""
    bar = Widget("frame", Rect(0, NAV_TOP, WIDTH, HEIGHT), rid=f"{SYSTEM_UI}:id/navigation_bar",
                 role="nav_bar")
    centers = {"back": 270, "home": 540, "recent_apps": 810}
    descs = {"back": "Back", "home": "Home", "recent_apps": "Overview"}
    for name, cx in centers.items():
        rect = Rect(cx - 100, NAV_TOP + 12, cx + 100, HEIGHT - 12)
        handlers: dict[str, Callable[[PhoneState], None]] = {
            "back": partial(system_back, screen=screen), "home": PhoneState.go_home}
        handler = handlers.get(name)
        bar.children.append(Widget("icon_button", rect, rid=f"{SYSTEM_UI}:id/{name}", desc=descs[name],
                                   glyph=f"nav_{name}", role="nav", on_click=handler))
    return bar


def system_back(state: PhoneState, screen: Screen) -> None:
    """Back closes the innermost thing first: menu, keyboard, dialog, then the screen (with
    the screen's own back behaviour, such as saving a note)."""
    if state.menu_open:
        state.menu_open = False
    elif state.focus is not None:
        state.focus = None
        state.shift = state.symbols = False
    elif state.dialog is not None:
        state.dialog = None
    elif screen.on_back is not None:
        screen.on_back(state)
    else:
        state.back()


# --- overlays -------------------------------------------------------------------------------

def dialog_box(ui: UI, title: str, message: str = "",
               buttons: tuple[tuple[str, str, Handler], ...] = (),
               field_name: str = "", placeholder: str = "") -> Widget:
    """A modal alert dialog: title, message, an optional text field, and buttons from right to
    left as (id, text, handler); ``button1`` is the positive one, as in Android."""
    ui.add(Widget("scrim", Rect(0, 0, WIDTH, HEIGHT), role="scrim"))
    height = 190 + (170 if message else 0) + (190 if field_name else 0) + 170
    top = max(STATUS_BAR_H + 80, (ui.bottom - height) // 2 + 100)
    box = Widget("dialog", Rect(90, top, WIDTH - 90, top + height), rid="android:id/parentPanel",
                 role="dialog")
    box.children.append(Widget("text", Rect(150, top + 70, WIDTH - 150, top + 150), rid="android:id/alertTitle",
                               text=title, size=56))
    y = top + 190
    if message:
        box.children.append(Widget("text", Rect(150, y, WIDTH - 150, y + 140), rid="android:id/message",
                                   text=message, size=TEXT_BODY, role="muted"))
        y += 170
    if field_name:
        box.children.append(ui.make_field(Rect(150, y, WIDTH - 150, y + 150), field_name, placeholder))
        y += 190
    right = WIDTH - 130
    for rid, text, handler in buttons:
        width = 80 + 30 * len(text)
        box.children.append(Widget("button", Rect(right - width, y, right, y + 130), rid=f"android:id/{rid}",
                                   text=text, role="text", align="center", on_click=handler))
        right -= width + 30
    ui.label("dialog", title)
    return ui.add(box)


def menu(ui: UI) -> None:
    """The overflow menu of the current screen, opened by the menu button or its icon."""
    items = ui.screen.menu
    top = STATUS_BAR_H + 40
    box = Widget("dialog", Rect(WIDTH - 560, top, WIDTH - 30, top + 40 + 150 * len(items)),
                 rid="android:id/menu", role="menu")
    for i, (name, text, handler) in enumerate(items):
        y = top + 20 + 150 * i
        box.children.append(Widget("row", Rect(WIDTH - 560, y, WIDTH - 30, y + 150), rid=ui.rid(f"menu_{name}"),
                                   text=text, on_click=handler, role="menu_item"))
    ui.label("menu", "open")
    ui.add(box)


def keyboard(ui: UI, state: PhoneState) -> None:
    """The on-screen keyboard for the focused field: letters (with shift) or symbols."""
    screen = ui.screen
    spec = screen.fields.get(state.focus or "")
    if spec is None:
        return
    board = Widget("frame", Rect(0, KEYBOARD_TOP, WIDTH, NAV_TOP), rid=f"{KEYBOARD_PACKAGE}:id/keyboard_view",
                   role="keyboard")
    rows = SYMBOL_ROWS if state.symbols else LETTER_ROWS
    key_h, gap = 180, 24
    for r, chars in enumerate(rows):
        top = KEYBOARD_TOP + gap + r * (key_h + gap)
        width = WIDTH // 10
        left = (WIDTH - width * len(chars)) // 2
        for i, char in enumerate(chars):
            shown = char.upper() if state.shift and not state.symbols else char
            board.children.append(_key(Rect(left + i * width + 6, top, left + (i + 1) * width - 6, top + key_h),
                                       shown, _typer(spec, shown)))
        if r == 2:
            board.children.append(_key(Rect(6, top, left - 12, top + key_h), "shift", _toggle_shift,
                                       glyph="shift", active=state.shift))
            board.children.append(_key(Rect(left + len(chars) * width + 12, top, WIDTH - 6, top + key_h),
                                       "delete", lambda s: backspace(s, spec), glyph="backspace"))
    top = KEYBOARD_TOP + gap + 3 * (key_h + gap)
    bottom_row = (
        (Rect(6, top, 190, top + key_h), "?123" if not state.symbols else "ABC", _toggle_symbols, ""),
        (Rect(202, top, 310, top + key_h), ",", _typer(spec, ","), ""),
        (Rect(322, top, 758, top + key_h), "space", _typer(spec, " "), "space"),
        (Rect(770, top, 878, top + key_h), ".", _typer(spec, "."), ""),
        (Rect(890, top, WIDTH - 6, top + key_h), "enter", lambda s: submit(s, spec), "enter"),
    )
    for rect, text, handler, glyph in bottom_row:
        board.children.append(_key(rect, text, handler, glyph=glyph))
    ui.label("keyboard", "symbols" if state.symbols else "shift" if state.shift else "letters")
    ui.add(board)


def toast(ui: UI, text: str) -> None:
    width = min(WIDTH - 120, 120 + 24 * len(text))
    top = ui.bottom - 330
    ui.add(Widget("toast", Rect((WIDTH - width) // 2, top, (WIDTH + width) // 2, top + 130), text=text,
                  size=TEXT_SMALL, align="center", role="toast"))
    ui.label("toast", text)


def _key(rect: Rect, text: str, handler: Handler, *, glyph: str = "", active: bool = False) -> Widget:
    name = KEY_NAMES.get(text) or text.lower().replace("?", "")
    shown = "" if glyph else text
    return Widget("key", rect, rid=f"{KEYBOARD_PACKAGE}:id/key_{name}", text=shown, desc=text, glyph=glyph,
                  checked=active if glyph == "shift" else None, align="center", on_click=handler,
                  role="key_special" if glyph or len(text) > 1 else "key")


def _typer(spec: FieldSpec, char: str) -> Handler:
    def press(state: PhoneState) -> None:
        type_text(state, spec, char)
        state.shift = False

    return press


def _toggle_shift(state: PhoneState) -> None:
    state.shift = not state.shift


def _toggle_symbols(state: PhoneState) -> None:
    state.symbols = not state.symbols
    state.shift = False


def apply_overlays(ui: UI, state: PhoneState) -> Screen:
    """Adds the system layers over an app's screen in z-order; the dialog is added by the
    app before this is called, because only the app knows what its dialogs say."""
    screen = ui.screen
    screen.widgets.insert(0, status_bar(state))
    if state.menu_open and screen.menu:
        menu(ui)
    if state.focus is not None:
        keyboard(ui, state)
    if state.toast:
        toast(ui, state.toast)
    ui.add(nav_bar(screen))
    if screen.dark:
        ui.label("theme", "dark")
    return screen
