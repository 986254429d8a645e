"""Messages tasks: send a contact a message."""

from __future__ import annotations

from episodelake.collectors.envs.sim import navigation as nav
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import PhoneState
from episodelake.collectors.envs.sim.tasks.base import Params, Template, contact, grid, new_messages

MESSAGE_CONTACTS = ["Alice Chen", "Daniel Kim", "Ben Carter", "Hannah Scott", "Maria Garcia", "Jon Park",
                    "Oliver Reed", "Priya Shah", "Yuki Tanaka", "Zoe Martin"]
MESSAGE_TEXTS = ["On my way", "Running late", "Call me back", "See you soon", "Happy birthday!"]


def _message_check(state: PhoneState, params: Params) -> bool:
    return any(m.from_me and m.text == params["text"]
               for m in new_messages(state, contact(params, "contact").id))


def _message_solve(phone: Phone, params: Params) -> nav.Action | None:
    contact_id = contact(params, "contact").id
    state = phone.state
    if nav.is_on(phone, "messages", "thread", contact_id):
        return nav.fill(phone, "message", params["text"]) or nav.press(phone, "send")
    if nav.is_on(phone, "messages", "new"):
        return nav.press(phone, f"recipient_{contact_id}") or nav.BACK
    if nav.is_on(phone, "messages", "main"):
        if contact_id in state.threads:
            return nav.press(phone, f"conversation_{contact_id}")
        return nav.press(phone, "start_chat")
    return nav.navigate(phone, "messages", [nav.Hop("main")])


TEMPLATES = [
    Template("message_send", 'Send {contact} the message "{text}".', "hard", _message_check, _message_solve,
             grid(contact=MESSAGE_CONTACTS, text=MESSAGE_TEXTS)),
]
