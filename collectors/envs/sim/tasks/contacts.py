"""Contacts tasks: add, delete and favourite contacts, and look up a number."""

from __future__ import annotations

from episodelake.collectors.envs.sim import navigation as nav
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import PhoneState
from episodelake.collectors.envs.sim.tasks.base import (
    Params,
    Template,
    confirming,
    contact,
    grid,
    initial,
    normalise,
)
from episodelake.collectors.envs.sim.tasks.messages import MESSAGE_CONTACTS

NEW_CONTACTS = [("Nora Blake", "555-0141"), ("Omar Haddad", "555-0142"), ("Paula Stone", "555-0143"),
                ("Ravi Kumar", "555-0144"), ("Sara Olsen", "555-0145"), ("Tariq Aziz", "555-0146")]
SOME_CONTACTS = ["Aaron Brooks", "Anna Lee", "Chloe Evans", "Jon Park", "Mario Garcia", "Quinn Taylor",
                 "Victor Hughes", "Zoe Martin"]


def _contacts_add_check(state: PhoneState, params: Params) -> bool:
    return any(c.name == params["name"] and c.phone == params["phone"] for c in state.contacts)


def _contacts_add_solve(phone: Phone, params: Params) -> nav.Action | None:
    if nav.is_on(phone, "contacts", "edit", "new"):
        return nav.fill(phone, "name", params["name"]) or nav.fill(phone, "phone", params["phone"]) or nav.press(phone, "save")
    return nav.navigate(phone, "contacts", [nav.Hop("main"), nav.Hop("edit", "add_contact", arg="new")])


def _to_contact_card(phone: Phone, contact_id: str) -> nav.Action | None:
    if nav.is_on(phone, "contacts", "detail", contact_id):
        return None
    return nav.navigate(phone, "contacts", [nav.Hop("main"), nav.Hop("detail", f"contact_{contact_id}", arg=contact_id)])


def _contacts_delete_check(state: PhoneState, params: Params) -> bool:
    others = {c.name for c in initial().contacts} - {params["name"]}
    return state.contact_named(params["name"]) is None and others <= {c.name for c in state.contacts}


def _contacts_delete_solve(phone: Phone, params: Params) -> nav.Action | None:
    state = phone.state
    found = state.contact_named(params["name"])
    if found is None:
        return None
    if confirming(state, "delete_contact", found.id):
        return nav.press(phone, "button1")
    route = state.route
    if state.menu_open and route is not None and route.screen == "detail" and route.arg == found.id:
        return nav.press(phone, "menu_delete")
    return _to_contact_card(phone, found.id) or nav.press(phone, "more")


def _contacts_favorite_check(state: PhoneState, params: Params) -> bool:
    found = state.contact_named(params["name"])
    return found is not None and found.favorite


def _contacts_favorite_solve(phone: Phone, params: Params) -> nav.Action | None:
    found = phone.state.contact_named(params["name"])
    if found is None:
        return None
    return _to_contact_card(phone, found.id) or nav.set_switch(phone, ("favorite",), True)


def _contact_phone_check(state: PhoneState, params: Params) -> bool:
    return normalise(state.answer) == normalise(contact(params, "name").phone)


def _contact_phone_solve(phone: Phone, params: Params) -> nav.Action | None:
    found = phone.state.contact_named(params["name"])
    if found is None:
        return None
    return _to_contact_card(phone, found.id) or {"action": "answer", "text": found.phone}


TEMPLATES = [
    Template("contacts_add", "Add a contact named {name} with the number {phone}.", "medium",
             _contacts_add_check, _contacts_add_solve,
             tuple({"name": n, "phone": p} for n, p in NEW_CONTACTS)),
    Template("contacts_delete", "Delete the contact {name}.", "medium", _contacts_delete_check,
             _contacts_delete_solve, grid(name=SOME_CONTACTS)),
    Template("contacts_favorite", "Add {name} to favourite contacts.", "medium", _contacts_favorite_check,
             _contacts_favorite_solve, grid(name=SOME_CONTACTS)),
    Template("contact_phone", "What is the phone number of {name}? Answer with the number.", "medium",
             _contact_phone_check, _contact_phone_solve,
             grid(name=list(dict.fromkeys(SOME_CONTACTS[:4] + MESSAGE_CONTACTS[:7])))),
]
