"""Contacts: a searchable alphabetical list longer than the screen, contact cards with call /
text / favourite, an editor, and deletion from the card's overflow menu or a long press."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from episodelake.collectors.envs.sim.apps.kit import (
    avatar_color,
    confirm_delete,
    contact_rows,
    open_editor,
)
from episodelake.collectors.envs.sim.geometry import CONTENT_TOP, WIDTH, Rect
from episodelake.collectors.envs.sim.state import Contact, Dialog, PhoneState
from episodelake.collectors.envs.sim.widgets import TEXT_SMALL, UI, Widget

PACKAGE = "com.google.android.contacts"


def dialog(ui: UI, box: Dialog) -> None:
    if box.kind == "delete_contact":
        contact = ui.state.contact(box.arg)
        assert contact is not None
        confirm_delete(ui, f"Delete {contact.name}?", "This contact will be removed from your phone.",
                       partial(_delete, contact.id))


def matches(contact: Contact, query: str) -> bool:
    """The list's search: case-insensitive substring of the name, or of the number."""
    query = query.strip().lower()
    return not query or query in contact.name.lower() or query in contact.phone


# --- handlers ------------------------------------------------------------------------------

def _open(contact: Contact, state: PhoneState) -> None:
    state.push("contacts", "detail", contact.id)


def _ask_delete(contact_id: str, state: PhoneState) -> None:
    state.menu_open = False
    state.dialog = Dialog("delete_contact", contact_id)


def _delete(contact_id: str, state: PhoneState) -> None:
    contact = state.contact(contact_id)
    assert contact is not None
    state.contacts = [c for c in state.contacts if c.id != contact_id]
    state.close_deleted("detail")
    state.toast = f"{contact.name} deleted"


def _favorite(contact_id: str, state: PhoneState) -> None:
    contact = state.contact(contact_id)
    assert contact is not None
    contact.favorite = not contact.favorite


def _call(contact_id: str, state: PhoneState) -> None:
    contact = state.contact(contact_id)
    assert contact is not None
    state.start_call(contact.phone)


def _text(contact_id: str, state: PhoneState) -> None:
    state.open_app("messages")
    state.push("messages", "thread", contact_id)


def _video(state: PhoneState) -> None:
    state.toast = "Video calling is not set up"


def _open_menu(state: PhoneState) -> None:
    state.menu_open = True


def _save(state: PhoneState) -> None:
    """Saves the form and shows the contact's card; a nameless contact is refused."""
    route = state.route
    assert route is not None
    name, phone = route.fields.get("name", "").strip(), route.fields.get("phone", "").strip()
    if not name:
        state.toast = "Enter a name"
        return
    if route.arg == "new":
        contact = Contact(state.new_id("c"), name, phone)
        state.contacts.append(contact)
    else:
        stored = state.contact(route.arg)
        assert stored is not None
        stored.name, stored.phone = name, phone
        contact = stored
    state.replace("detail", contact.id)
    state.toast = "Contact saved"


# --- screens -------------------------------------------------------------------------------

def _list(ui: UI) -> None:
    state = ui.state
    ui.app_bar("Contacts")
    ui.field(Rect(40, CONTENT_TOP + 10, WIDTH - 40, CONTENT_TOP + 150), "search", "Search contacts",
             max_length=40)
    query = ui.route.fields.get("search", "") if ui.route else ""
    lst = ui.list_view("contact_list", top=CONTENT_TOP + 170)
    shown = [c for c in state.contacts if matches(c, query)]
    favorites = [c for c in shown if c.favorite]
    if favorites:
        lst.header("Favorites", height=90)
        for contact in sorted(favorites, key=lambda c: c.name):
            lst.row(contact.name, name=f"favorite_{contact.id}", on_click=partial(_open, contact),
                    avatar=contact.name[0], avatar_color=avatar_color(contact.name), height=160)
    contact_rows(lst, shown, "contact", lambda c: partial(_open, c), lambda c: partial(_ask_delete, c.id))
    if not shown:
        lst.add(Widget("text", Rect(80, 100, WIDTH - 80, 200), text="No contacts found", role="muted",
                       align="center"), 300)
    lst.done()
    ui.fab("add_contact", "Create contact", open_editor("contacts"), glyph="person_add")


def _detail(ui: UI) -> None:
    route = ui.route
    assert route is not None
    contact = ui.state.contact(route.arg)
    assert contact is not None
    ui.screen.menu = [("delete", "Delete", partial(_ask_delete, contact.id))]
    ui.app_bar("", back=PhoneState.back, actions=(
        ui.action("favorite", "star", "Favorite", partial(_favorite, contact.id), checked=contact.favorite),
        ui.action("edit", "edit", "Edit contact",
                  open_editor("contacts", contact.id, name=contact.name, phone=contact.phone)),
        ui.action("more", "more", "More options", _open_menu),
    ))
    ui.screen.title = contact.name
    top = CONTENT_TOP + 60
    ui.add(Widget("avatar", Rect(WIDTH // 2 - 170, top, WIDTH // 2 + 170, top + 340), text=contact.name[0],
                  color=avatar_color(contact.name), size=160))
    ui.text(Rect(60, top + 380, WIDTH - 60, top + 480), contact.name, name="name", size=80, align="center")
    y = top + 560
    buttons: tuple[tuple[str, str, str, Callable[[PhoneState], None]], ...] = (
        ("call", "call", "Call", partial(_call, contact.id)),
        ("text", "message", "Text", partial(_text, contact.id)),
        ("video", "video", "Video", _video),
    )
    for i, (name, glyph, text, handler) in enumerate(buttons):
        left = 120 + i * 300
        button = ui.add(Widget("icon_button", Rect(left, y, left + 240, y + 240), rid=ui.rid(name), desc=text,
                               glyph=glyph, role="tonal", on_click=handler))
        button.children.append(Widget("text", Rect(left, y + 170, left + 240, y + 230), text=text,
                                      size=TEXT_SMALL, align="center"))
    y += 320
    card = ui.add(Widget("card", Rect(40, y, WIDTH - 40, y + 260), rid=ui.rid("phone_row"), desc="Contact info",
                         on_click=partial(_call, contact.id)))
    card.children.append(Widget("text", Rect(100, y + 40, WIDTH - 300, y + 90), text="Contact info",
                                size=TEXT_SMALL, role="accent"))
    card.children.append(Widget("text", Rect(100, y + 110, WIDTH - 300, y + 180), rid=ui.rid("phone_number"),
                                text=contact.phone or "No phone number", size=54))
    card.children.append(Widget("text", Rect(100, y + 185, WIDTH - 300, y + 240), text="Mobile",
                                size=TEXT_SMALL, role="muted"))
    ui.label("contact", f"{contact.name}/{contact.phone}")


def _editor(ui: UI) -> None:
    route = ui.route
    assert route is not None
    new = route.arg == "new"
    ui.app_bar("Create contact" if new else "Edit contact", back=PhoneState.back)
    top = CONTENT_TOP + 40
    ui.text(Rect(80, top, WIDTH - 80, top + 60), "Name", size=TEXT_SMALL, role="accent")
    ui.field(Rect(60, top + 70, WIDTH - 60, top + 220), "name", "Name", max_length=40)
    ui.text(Rect(80, top + 260, WIDTH - 80, top + 320), "Phone", size=TEXT_SMALL, role="accent")
    ui.field(Rect(60, top + 330, WIDTH - 60, top + 480), "phone", "Phone", max_length=20)
    y = top + 560
    if y + 150 <= ui.bottom:
        ui.button(Rect(WIDTH - 680, y, WIDTH - 400, y + 150), "Cancel", "cancel", PhoneState.back, role="text")
        ui.button(Rect(WIDTH - 360, y, WIDTH - 60, y + 150), "Save", "save", _save)


#: The app's screens by route name, each laying its screen out.
SCREENS: dict[str, Callable[[UI], None]] = {"main": _list, "detail": _detail, "edit": _editor}
