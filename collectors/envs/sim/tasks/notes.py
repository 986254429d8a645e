"""Notes tasks: create, delete and share notes."""

from __future__ import annotations

from episodelake.collectors.envs.sim import catalog
from episodelake.collectors.envs.sim import navigation as nav
from episodelake.collectors.envs.sim.apps.notes import share_text
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import Note, PhoneState
from episodelake.collectors.envs.sim.tasks.base import (
    Params,
    Template,
    contact,
    delete_from_list,
    grid,
    initial,
    new_messages,
)

NOTE_TITLES = ["Groceries", "Packing", "Ideas", "Workout", "Recipes", "Todo"]
NOTE_BODIES = ["milk", "call mom", "pack charger", "buy stamps"]
SHARE_CONTACTS = ["Alice Chen", "Ben Carter", "Grace Hall", "Nina Patel", "Sam Turner", "Zoe Martin"]
NEW_NOTE = [nav.Hop("main"), nav.Hop("edit", "new_note", arg="new")]


def _note(state: PhoneState, title: str, body: str | None = None) -> Note | None:
    return next((n for n in state.notes if n.title == title and (body is None or n.body == body)), None)


def _is_new_note(note_id: str) -> bool:
    return note_id == "new" or initial().note(note_id) is None


def _notes_create_check(state: PhoneState, params: Params) -> bool:
    return _note(state, params["title"], params["body"]) is not None


def _write_note(phone: Phone, params: Params) -> nav.Action | None:
    """Fills the open editor with the note; None once it holds exactly that."""
    return nav.fill(phone, "title", params["title"]) or nav.fill(phone, "body", params["body"])


def _in_new_note_editor(phone: Phone) -> bool:
    route = phone.state.route
    return (route is not None and route.app == "notes" and route.screen == "edit"
            and _is_new_note(route.arg))


def _notes_create_solve(phone: Phone, params: Params) -> nav.Action | None:
    if _in_new_note_editor(phone):
        return nav.dismiss(phone) or _write_note(phone, params) or nav.press(phone, "save")
    return nav.navigate(phone, "notes", NEW_NOTE)


def _notes_delete_check(state: PhoneState, params: Params) -> bool:
    others = {n.title for n in initial().notes} - {params["title"]}
    return _note(state, params["title"]) is None and others <= {n.title for n in state.notes}


def _notes_delete_solve(phone: Phone, params: Params) -> nav.Action | None:
    note = _note(phone.state, params["title"])
    if note is None:
        return None
    return delete_from_list(phone, "notes", "delete_note", note.id, f"note_{note.id}")


def _notes_share_check(state: PhoneState, params: Params) -> bool:
    note = _note(state, params["title"], params["body"])
    contact_id = contact(params, "contact").id
    return note is not None and any(m.from_me and m.text == share_text(note)
                                    for m in new_messages(state, contact_id))


def _notes_share_solve(phone: Phone, params: Params) -> nav.Action | None:
    state = phone.state
    route = state.route
    note = _note(state, params["title"], params["body"])
    if route is not None and route.app == "notes" and state.dialog is None and not state.menu_open:
        if route.screen == "share":
            if note is not None and route.arg == note.id:
                return nav.press(phone, f"share_{contact(params, 'contact').id}")
            return nav.BACK
        drafted = route.fields.get("title") == params["title"] and route.fields.get("body") == params["body"]
        if route.screen == "edit" and drafted:
            return nav.press(phone, "share")
        if route.screen == "edit" and _is_new_note(route.arg):
            return _write_note(phone, params)
    if note is not None:
        return nav.navigate(phone, "notes", [nav.Hop("main"), nav.Hop("edit", f"note_{note.id}", arg=note.id)])
    return nav.navigate(phone, "notes", NEW_NOTE)


TEMPLATES = [
    Template("notes_create", 'Create a note titled "{title}" with the text "{body}".', "medium",
             _notes_create_check, _notes_create_solve, grid(title=NOTE_TITLES, body=NOTE_BODIES)),
    Template("notes_delete", 'Delete the note "{title}".', "medium", _notes_delete_check,
             _notes_delete_solve, grid(title=[title for title, _ in catalog.NOTES])),
    Template("notes_share", 'Create a note titled "{title}" with the text "{body}", then share it with '
             "{contact}.", "hard", _notes_share_check, _notes_share_solve,
             grid(title=NOTE_TITLES[:2], body=NOTE_BODIES[:2], contact=SHARE_CONTACTS)),
]
