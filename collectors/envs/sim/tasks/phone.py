"""Phone (dialer) tasks: call a contact or a number."""

from __future__ import annotations

from episodelake.collectors.envs.sim import catalog
from episodelake.collectors.envs.sim import navigation as nav
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import PhoneState
from episodelake.collectors.envs.sim.tasks.base import Params, Template, contact, grid, initial

DIAL_NUMBERS = ["555-0199", "555-0142", "555-0177", "555-0188", "555-0155", "555-0166"]


def _called(state: PhoneState, number: str) -> bool:
    return any(c.outgoing and c.number == number for c in state.calls[len(initial().calls):])


def _call_contact_check(state: PhoneState, params: Params) -> bool:
    return _called(state, contact(params, "name").phone)


def _call_contact_solve(phone: Phone, params: Params) -> nav.Action | None:
    if nav.is_on(phone, "phone", "contacts"):
        return nav.press(phone, f"dial_{contact(params, 'name').id}")
    return nav.navigate(phone, "phone", [nav.Hop("contacts", "tab_contacts")])


def _dial_check(state: PhoneState, params: Params) -> bool:
    return _called(state, params["number"])


def _dial_solve(phone: Phone, params: Params) -> nav.Action | None:
    if nav.is_on(phone, "phone", "main"):
        return nav.fill(phone, "number", params["number"]) or nav.press(phone, "dial_button")
    return nav.navigate(phone, "phone", [nav.Hop("main", "tab_keypad")])


TEMPLATES = [
    Template("call_contact", "Call {name}.", "medium", _call_contact_check, _call_contact_solve,
             grid(name=[name for name, _ in catalog.CONTACTS])),
    Template("dial_number", "Call the number {number}.", "medium", _dial_check, _dial_solve,
             grid(number=DIAL_NUMBERS)),
]
