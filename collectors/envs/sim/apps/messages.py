"""Messages: conversations, a new-conversation contact picker, and a thread with a compose
bar. The thread's call icon is a deliberate distractor for messaging tasks."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from episodelake.collectors.envs.sim.apps.contacts import matches
from episodelake.collectors.envs.sim.apps.kit import avatar_color, contact_rows
from episodelake.collectors.envs.sim.geometry import CONTENT_TOP, WIDTH, Rect
from episodelake.collectors.envs.sim.state import Contact, PhoneState
from episodelake.collectors.envs.sim.widgets import TEXT_SMALL, UI, Widget

PACKAGE = "com.google.android.apps.messaging"


# --- handlers ------------------------------------------------------------------------------

def _open_thread(contact_id: str, state: PhoneState) -> None:
    state.push("messages", "thread", contact_id)


def _pick(contact: Contact, state: PhoneState) -> None:
    state.replace("thread", contact.id)


def _start_chat(state: PhoneState) -> None:
    state.push("messages", "new")


def _send(state: PhoneState) -> None:
    route = state.route
    assert route is not None
    text = route.fields.get("message", "").strip()
    if text:
        state.send_message(route.arg, text)
        route.fields["message"] = ""


def _call(contact_id: str, state: PhoneState) -> None:
    contact = state.contact(contact_id)
    assert contact is not None
    state.start_call(contact.phone)


# --- screens -------------------------------------------------------------------------------

def _display_name(state: PhoneState, contact_id: str) -> str:
    contact = state.contact(contact_id)
    return contact.name if contact else "Unknown"


def _threads(ui: UI) -> None:
    state = ui.state
    ui.app_bar("Messages")
    lst = ui.list_view("conversation_list")
    for contact_id, messages in reversed(list(state.threads.items())):
        name = _display_name(state, contact_id)
        last = messages[-1].text if messages else ""
        lst.row(name, name=f"conversation_{contact_id}", subtitle=("You: " if messages and messages[-1].from_me
                                                                   else "") + last,
                avatar=name[0], avatar_color=avatar_color(name), on_click=partial(_open_thread, contact_id),
                height=200)
    lst.done()
    ui.fab("start_chat", "Start chat", _start_chat, glyph="message")


def _new_conversation(ui: UI) -> None:
    assert ui.route is not None
    ui.app_bar("New conversation", back=PhoneState.back)
    ui.field(Rect(40, CONTENT_TOP + 10, WIDTH - 40, CONTENT_TOP + 150), "to", "Type name or number",
             max_length=40)
    query = ui.route.fields.get("to", "")
    lst = ui.list_view("recipient_list", top=CONTENT_TOP + 170)
    contact_rows(lst, [c for c in ui.state.contacts if matches(c, query)], "recipient",
                 lambda c: partial(_pick, c))
    lst.done()


def _thread(ui: UI) -> None:
    route = ui.route
    assert route is not None
    state = ui.state
    ui.app_bar(_display_name(state, route.arg), back=PhoneState.back, actions=(
        ui.action("call", "call", "Call", partial(_call, route.arg)),
    ))
    bar_top = ui.bottom - 180
    lst = ui.list_view("message_list", bottom=bar_top)
    for message in state.threads.get(route.arg, []):
        lines = max(1, len(message.text) // 26 + 1)
        height = 60 + 64 * lines
        width = min(WIDTH - 300, 110 + 30 * len(message.text))
        left = WIDTH - 48 - width if message.from_me else 48
        lst.add(Widget("bubble", Rect(left, 20, left + width, 20 + height), text=message.text,
                       role="mine" if message.from_me else "theirs", size=TEXT_SMALL), height + 40)
    lst.done()
    ui.add(Widget("frame", Rect(0, bar_top, WIDTH, ui.bottom), role="compose_bar"))
    ui.field(Rect(40, bar_top + 20, WIDTH - 200, bar_top + 160), "message", "Text message", on_submit=_send,
             max_length=300)
    has_text = bool(route.fields.get("message", "").strip())
    ui.icon_button(Rect(WIDTH - 170, bar_top + 25, WIDTH - 40, bar_top + 155), "send", "send", "Send SMS",
                   _send if has_text else None, role="primary" if has_text else "disabled")


#: The app's screens by route name, each laying its screen out.
SCREENS: dict[str, Callable[[UI], None]] = {"main": _threads, "new": _new_conversation, "thread": _thread}
