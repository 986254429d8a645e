"""Pieces several apps share: avatar colours, toggle rows, the contact picker list, the
editor's opening, the delete confirmation."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable

from episodelake.collectors.envs.sim.geometry import Rect
from episodelake.collectors.envs.sim.overlays import dialog_box
from episodelake.collectors.envs.sim.state import Contact, PhoneState
from episodelake.collectors.envs.sim.widgets import UI, Handler, ListBuilder

AVATAR_COLORS = (
    (219, 68, 55), (244, 160, 0), (15, 157, 88), (66, 133, 244), (171, 71, 188),
    (0, 172, 193), (255, 112, 67), (92, 107, 192), (124, 179, 66), (141, 110, 99),
)

SWITCH_SIZE = Rect(0, 0, 150, 84)


def avatar_color(name: str) -> tuple[int, int, int]:
    """A stable colour per name (crc32, not hash(), which changes between processes)."""
    return AVATAR_COLORS[zlib.crc32(name.encode()) % len(AVATAR_COLORS)]


def toggle_row(lst: ListBuilder, title: str, name: str, checked: bool, toggle: Handler, *,
               subtitle: str = "", glyph: str = "") -> None:
    """A settings row whose switch and whole row both flip the same setting."""
    switch = lst.ui.switch(SWITCH_SIZE, f"{name}_switch", checked, toggle)
    lst.row(title, name=name, subtitle=subtitle, on_click=toggle, trailing=switch, glyph=glyph)


def contact_rows(lst: ListBuilder, contacts: Iterable[Contact], prefix: str,
                 on_pick: Callable[[Contact], Handler],
                 on_long_press: Callable[[Contact], Handler] | None = None) -> None:
    """Contacts in alphabetical order under letter headers; row ids are ``<prefix>_<id>``."""
    letter = ""
    for contact in sorted(contacts, key=lambda c: c.name):
        if contact.name[0] != letter:
            letter = contact.name[0]
            lst.header(letter, height=90)
        lst.row(contact.name, name=f"{prefix}_{contact.id}", on_click=on_pick(contact),
                on_long_press=on_long_press(contact) if on_long_press else None,
                avatar=contact.name[0], avatar_color=avatar_color(contact.name), height=160)


def open_editor(app: str, item_id: str = "new", **draft: str) -> Handler:
    """Opens `app`'s ``edit`` screen on one item, its values as the draft, or on ``"new"``.
    The screen is rebuilt from the state before every tap, so values read while laying it
    out are the item's values at the tap."""
    def handler(state: PhoneState) -> None:
        state.push(app, "edit", item_id, **draft)
    return handler


def close_dialog(state: PhoneState) -> None:
    """Cancel: the dialog closes, and a text field in it loses the keyboard."""
    state.dialog = None
    state.focus = None


def confirm_delete(ui: UI, title: str, message: str, delete: Handler) -> None:
    """The confirmation every delete asks for: Delete (``button1``) or Cancel."""
    dialog_box(ui, title, message, buttons=(("button1", "Delete", delete), ("button2", "Cancel", close_dialog)))
