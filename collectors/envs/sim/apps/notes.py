"""Notes: a list of note cards, an editor that saves on back (as Keep does), deletion with
confirmation, and sharing a note to a contact as a message."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from episodelake.collectors.envs.sim.apps.kit import confirm_delete, contact_rows, open_editor
from episodelake.collectors.envs.sim.geometry import CONTENT_TOP, WIDTH, Rect
from episodelake.collectors.envs.sim.state import Contact, Dialog, Note, PhoneState
from episodelake.collectors.envs.sim.widgets import TEXT_SMALL, UI, Widget

PACKAGE = "com.google.android.keep"


def share_text(note: Note) -> str:
    """The message a shared note becomes."""
    return f"{note.title}: {note.body}" if note.body else note.title


def dialog(ui: UI, box: Dialog) -> None:
    if box.kind == "delete_note":
        note = ui.state.note(box.arg)
        title = f'Delete "{note.title}"?' if note is not None and note.title else "Delete this note?"
        confirm_delete(ui, title, "The note will be deleted.", partial(_delete, box.arg))


# --- handlers ------------------------------------------------------------------------------

def _ask_delete(note_id: str, state: PhoneState) -> None:
    state.dialog = Dialog("delete_note", note_id)
    state.focus = None


def _delete(note_id: str, state: PhoneState) -> None:
    """Deletes the note (an unsaved new one is just discarded) and leaves its editor."""
    state.notes = [n for n in state.notes if n.id != note_id]
    state.close_deleted("edit")
    state.toast = "Note deleted"


def _commit(state: PhoneState) -> Note | None:
    """Writes the editor's draft into the notes; returns the note (None for an empty new one)."""
    route = state.route
    assert route is not None and route.screen == "edit"
    title, body = route.fields.get("title", "").strip(), route.fields.get("body", "").strip()
    if route.arg == "new":
        if not title and not body:
            return None
        note = Note(state.new_id("n"), title, body)
        state.notes.append(note)
        route.arg = note.id
        return note
    stored = state.note(route.arg)
    assert stored is not None
    stored.title, stored.body = title, body
    return stored


def _save_and_close(state: PhoneState) -> None:
    _commit(state)
    state.back()


def _share_note(state: PhoneState) -> None:
    note = _commit(state)
    if note is None:
        state.toast = "Nothing to share"
        return
    state.push("notes", "share", note.id)


def _send_to(contact: Contact, state: PhoneState) -> None:
    route = state.route
    assert route is not None
    note = state.note(route.arg)
    assert note is not None
    state.send_message(contact.id, share_text(note))
    state.toast = f"Sent to {contact.name}"
    state.back()


# --- screens -------------------------------------------------------------------------------

def _list(ui: UI) -> None:
    ui.app_bar("Notes")
    lst = ui.list_view("notes_list")
    for note in reversed(ui.state.notes):
        card = Widget("card", Rect(40, 20, WIDTH - 40, 300), rid=ui.rid(f"note_{note.id}"),
                      desc=note.title or "Untitled",
                      on_click=open_editor("notes", note.id, title=note.title, body=note.body),
                      on_long_press=partial(_ask_delete, note.id), role="note")
        card.children.append(Widget("text", Rect(90, 60, WIDTH - 90, 140), text=note.title or "Untitled",
                                    size=54, role="" if note.title else "muted"))
        card.children.append(Widget("text", Rect(90, 160, WIDTH - 90, 230), text=note.body.split("\n")[0],
                                    size=TEXT_SMALL, role="muted"))
        lst.add(card, 320)
    if not ui.state.notes:
        lst.add(Widget("text", Rect(80, 200, WIDTH - 80, 300), text="Notes you add appear here",
                       role="muted", align="center"), 400)
    lst.done()
    ui.fab("new_note", "New note", open_editor("notes"))


def _editor(ui: UI) -> None:
    route = ui.route
    assert route is not None
    ui.screen.on_back = _save_and_close
    ui.screen.menu = [("share", "Send", _share_note), ("delete", "Delete", partial(_ask_delete, route.arg))]
    ui.app_bar("Edit note" if route.arg != "new" else "New note", back=_save_and_close, actions=(
        ui.action("share", "share", "Send", _share_note),
        ui.action("delete", "delete", "Delete", partial(_ask_delete, route.arg)),
        ui.action("save", "check", "Save", _save_and_close),
    ))
    ui.field(Rect(40, CONTENT_TOP + 30, WIDTH - 40, CONTENT_TOP + 200), "title", "Title", max_length=60)
    ui.field(Rect(40, CONTENT_TOP + 230, WIDTH - 40, ui.bottom - 40), "body", "Note", multiline=True,
             max_length=500)


def _share(ui: UI) -> None:
    ui.app_bar("Send to", back=PhoneState.back)
    lst = ui.list_view("share_list")
    contact_rows(lst, ui.state.contacts, "share", lambda c: partial(_send_to, c))
    lst.done()


#: The app's screens by route name, each laying its screen out.
SCREENS: dict[str, Callable[[UI], None]] = {"main": _list, "edit": _editor, "share": _share}
