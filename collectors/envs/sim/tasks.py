"""Task templates for the simulated phone, and the registry of every concrete task.

A template has parameters (``notes_create`` takes a title and a body); a :class:`Task` is a
template with values, named by a stable id such as ``notes_create[title=Groceries,body=milk]``.
Each task can set the phone up, check success on the phone's internal state (strictly: the
wrong contact, the wrong minute, the other USB-C cable all fail), and give the oracle's next
action from whatever state the phone is in, so a demo policy can add noise and still finish.

Goals never say how to do the task, only what should be true afterwards.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from itertools import product

from episodelake.collectors.envs.sim import catalog
from episodelake.collectors.envs.sim.apps.clock import parse_time
from episodelake.collectors.envs.sim.apps.notes import share_text
from episodelake.collectors.envs.sim.navigation import (
    BACK,
    Action,
    Hop,
    dismiss,
    fill,
    find,
    is_on,
    navigate,
    open_app,
    press,
    set_slider,
    set_switch,
    tap,
)
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import APPS, PRODUCTS, Message, PhoneState, initial_state

log = logging.getLogger(__name__)

Params = dict[str, str]
DIFFICULTIES = ("easy", "medium", "hard")
TERMINATE_SUCCESS: Action = {"action": "terminate", "status": "success"}
TERMINATE_FAIL: Action = {"action": "terminate", "status": "fail"}

#: Characters a parameter value may not contain, because task ids are ``name[k=v,k=v]``.
RESERVED = set(",=[]")
TASK_ID = re.compile(r"^(?P<name>[a-z0-9_]+)(?:\[(?P<params>.*)\])?$")


@dataclass(frozen=True)
class Template:
    """A kind of task. ``grid`` lists every parameter combination it is registered with;
    ``setup``, ``check`` and ``solve`` get the phone (or its state) and the parameters."""

    name: str
    goal: str
    difficulty: str
    check: Callable[[PhoneState, Params], bool]
    solve: Callable[[Phone, Params], Action | None]
    grid: tuple[Params, ...] = ({},)
    setup: Callable[[PhoneState, Params], None] | None = None

    def __post_init__(self) -> None:
        assert self.difficulty in DIFFICULTIES, self.difficulty
        for params in self.grid:
            for value in params.values():
                assert not RESERVED & set(value), f"{self.name}: {value!r} has one of {RESERVED}"


@dataclass(frozen=True)
class Task:
    """One concrete task: a template and its parameter values."""

    template: Template
    params: tuple[tuple[str, str], ...] = field(default=())

    @property
    def name(self) -> str:
        return self.template.name

    @property
    def id(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}[{','.join(f'{k}={v}' for k, v in self.params)}]"

    @property
    def goal(self) -> str:
        return self.template.goal.format(**dict(self.params))

    @property
    def difficulty(self) -> str:
        return self.template.difficulty

    def setup(self, phone: Phone) -> None:
        """Puts the phone in the task's starting state (on the home screen)."""
        if self.template.setup is not None:
            self.template.setup(phone.state, dict(self.params))
        phone.invalidate()

    def check(self, phone: Phone) -> bool:
        return self.template.check(phone.state, dict(self.params))

    def solution(self, phone: Phone) -> Action:
        """The oracle's next action from the phone's current state; ``terminate success`` once
        the goal holds, ``terminate fail`` if the goal can no longer be reached."""
        if self.check(phone):
            return dict(TERMINATE_SUCCESS)
        action = self.template.solve(phone, dict(self.params))
        if action is None:
            log.info("oracle for %s has no way forward from %s", self.id, phone.screen_id())
            return dict(TERMINATE_FAIL)
        return action

    def __str__(self) -> str:
        return self.id


# --- shared lookups -------------------------------------------------------------------------

@cache
def _initial() -> PhoneState:
    return initial_state(0)


def _contact_id(name: str) -> str:
    contact = _initial().contact_named(name)
    assert contact is not None, name
    return contact.id


def _product_id(name: str) -> str:
    return next(p.id for p in PRODUCTS.values() if p.name == name)


def _new_messages(state: PhoneState, contact_id: str) -> list[Message]:
    before = len(_initial().threads.get(contact_id, []))
    return state.threads.get(contact_id, [])[before:]


def _normalise(text: str | None) -> str:
    return re.sub(r"[^0-9a-z.]", "", (text or "").lower())


# --- settings -------------------------------------------------------------------------------

SETTINGS_MAIN = [Hop("main")]
NETWORK = [*SETTINGS_MAIN, Hop("network", "network")]
WIFI_PAGE = [*NETWORK, Hop("wifi", "wifi")]
DEVICES = [*SETTINGS_MAIN, Hop("devices", "devices")]
DISPLAY = [*SETTINGS_MAIN, Hop("display", "display")]
SOUND = [*SETTINGS_MAIN, Hop("sound", "sound")]


def _toggle_task(attribute: str, switches: tuple[str, ...], path: list[Hop], on: bool | None = None):
    """check/solve for a settings switch; ``on`` fixed, or taken from the ``state`` param."""

    def wanted(params: Params) -> bool:
        return on if on is not None else params["state"] == "on"

    def check(state: PhoneState, params: Params) -> bool:
        return getattr(state.settings, attribute) == wanted(params)

    def solve(phone: Phone, params: Params) -> Action | None:
        if phone.state.foreground == "settings" and any(find(phone, name) for name in switches):
            return set_switch(phone, switches, wanted(params))
        return navigate(phone, "settings", path)

    def setup(state: PhoneState, params: Params) -> None:
        value = not wanted(params)
        setattr(state.settings, attribute, value)
        if attribute == "airplane" and value:
            state.settings.wifi = state.settings.bluetooth = False
        if attribute in ("wifi", "bluetooth"):
            state.settings.airplane = False

    return {"check": check, "solve": solve, "setup": setup}


def _slider_task(attribute: str, slider: str, path: list[Hop]):
    def check(state: PhoneState, params: Params) -> bool:
        return getattr(state.settings, attribute) == int(params["level"])

    def solve(phone: Phone, params: Params) -> Action | None:
        if phone.state.foreground == "settings" and find(phone, slider) is not None:
            return set_slider(phone, slider, int(params["level"]))
        return navigate(phone, "settings", path)

    return {"check": check, "solve": solve}


def _wifi_connect_check(state: PhoneState, params: Params) -> bool:
    return state.settings.wifi and state.settings.wifi_network == params["network"]


def _wifi_connect_solve(phone: Phone, params: Params) -> Action | None:
    if is_on(phone, "settings", "wifi"):
        slug = params["network"].lower().replace("-", "_")
        return set_switch(phone, ("wifi_master",), True) or press(phone, f"network_{slug}")
    return navigate(phone, "settings", WIFI_PAGE)


def _wifi_connect_setup(state: PhoneState, params: Params) -> None:
    state.settings.wifi, state.settings.airplane, state.settings.wifi_network = True, False, "HomeNet"


# --- launcher -------------------------------------------------------------------------------

def _open_app_check(state: PhoneState, params: Params) -> bool:
    return state.foreground == params["app"]


def _open_app_solve(phone: Phone, params: Params) -> Action | None:
    return dismiss(phone) or open_app(phone, params["app"])


# --- clock ----------------------------------------------------------------------------------

def _alarm_at(state: PhoneState, time: str):
    parsed = parse_time(time)
    assert parsed is not None, time
    return next((a for a in state.alarms if (a.hour, a.minute) == parsed), None)


def _alarm_create_check(state: PhoneState, params: Params) -> bool:
    alarm = _alarm_at(state, params["time"])
    return alarm is not None and alarm.enabled


def _alarm_create_solve(phone: Phone, params: Params) -> Action | None:
    state = phone.state
    route = state.route
    wanted = parse_time(params["time"])
    if route is not None and route.app == "clock" and route.screen == "edit" and route.arg == "new":
        if state.dialog is not None and state.dialog.kind == "time":
            return fill(phone, "time_input", params["time"]) or press(phone, "button1")
        if state.dialog is not None or state.menu_open:
            return dismiss(phone)
        if (int(route.fields["hour"]), int(route.fields["minute"])) == wanted:
            return press(phone, "save")
        return press(phone, "time_display")
    return navigate(phone, "clock", [Hop("main"), Hop("edit", "add_alarm", arg="new")])


def _alarm_switch_check(state: PhoneState, params: Params) -> bool:
    alarm = _alarm_at(state, params["time"])
    return alarm is not None and alarm.enabled == (params["state"] == "on")


def _alarm_switch_solve(phone: Phone, params: Params) -> Action | None:
    alarm = _alarm_at(phone.state, params["time"])
    if alarm is None:
        return None
    if is_on(phone, "clock", "main"):
        return set_switch(phone, (f"alarm_switch_{alarm.id}",), params["state"] == "on")
    return navigate(phone, "clock", [Hop("main")])


def _alarm_delete_check(state: PhoneState, params: Params) -> bool:
    initial = {a.time for a in _initial().alarms} - {params["time"]}
    return _alarm_at(state, params["time"]) is None and initial <= {a.time for a in state.alarms}


def _alarm_delete_solve(phone: Phone, params: Params) -> Action | None:
    state = phone.state
    alarm = _alarm_at(state, params["time"])
    if alarm is None:
        return None
    if state.dialog is not None and state.dialog.kind == "delete_alarm" and state.dialog.arg == alarm.id:
        return press(phone, "button1")
    if is_on(phone, "clock", "main"):
        return tap(phone, f"alarm_{alarm.id}", kind="long_press")
    return navigate(phone, "clock", [Hop("main")])


# --- notes ----------------------------------------------------------------------------------

def _note(state: PhoneState, title: str, body: str | None = None):
    return next((n for n in state.notes if n.title == title and (body is None or n.body == body)), None)


def _is_new_note(note_id: str) -> bool:
    return note_id == "new" or _initial().note(note_id) is None


def _notes_create_check(state: PhoneState, params: Params) -> bool:
    return _note(state, params["title"], params["body"]) is not None


def _write_note(phone: Phone, params: Params) -> Action | None:
    """Fills the open editor with the note; None once it holds exactly that."""
    return fill(phone, "title", params["title"]) or fill(phone, "body", params["body"])


def _in_new_note_editor(phone: Phone) -> bool:
    route = phone.state.route
    return (route is not None and route.app == "notes" and route.screen == "edit"
            and _is_new_note(route.arg))


def _notes_create_solve(phone: Phone, params: Params) -> Action | None:
    if _in_new_note_editor(phone):
        return dismiss(phone) or _write_note(phone, params) or press(phone, "save")
    return navigate(phone, "notes", [Hop("main"), Hop("edit", "new_note", arg="new")])


def _notes_delete_check(state: PhoneState, params: Params) -> bool:
    others = {n.title for n in _initial().notes} - {params["title"]}
    return _note(state, params["title"]) is None and others <= {n.title for n in state.notes}


def _notes_delete_solve(phone: Phone, params: Params) -> Action | None:
    state = phone.state
    note = _note(state, params["title"])
    if note is None:
        return None
    if state.dialog is not None and state.dialog.kind == "delete_note" and state.dialog.arg == note.id:
        return press(phone, "button1")
    if is_on(phone, "notes", "main"):
        return tap(phone, f"note_{note.id}", kind="long_press")
    return navigate(phone, "notes", [Hop("main")])


def _notes_share_check(state: PhoneState, params: Params) -> bool:
    note = _note(state, params["title"], params["body"])
    contact_id = _contact_id(params["contact"])
    return note is not None and any(m.from_me and m.text == share_text(note)
                                    for m in _new_messages(state, contact_id))


def _notes_share_solve(phone: Phone, params: Params) -> Action | None:
    state = phone.state
    route = state.route
    note = _note(state, params["title"], params["body"])
    if route is not None and route.app == "notes" and state.dialog is None and not state.menu_open:
        if route.screen == "share":
            if note is not None and route.arg == note.id:
                return press(phone, f"share_{_contact_id(params['contact'])}")
            return BACK
        drafted = route.fields.get("title") == params["title"] and route.fields.get("body") == params["body"]
        if route.screen == "edit" and drafted:
            return press(phone, "share")
        if route.screen == "edit" and _is_new_note(route.arg):
            return _write_note(phone, params)
    if note is not None:
        return navigate(phone, "notes", [Hop("main"), Hop("edit", f"note_{note.id}", arg=note.id)])
    return navigate(phone, "notes", [Hop("main"), Hop("edit", "new_note", arg="new")])


# --- contacts -------------------------------------------------------------------------------

def _contacts_add_check(state: PhoneState, params: Params) -> bool:
    return any(c.name == params["name"] and c.phone == params["phone"] for c in state.contacts)


def _contacts_add_solve(phone: Phone, params: Params) -> Action | None:
    if is_on(phone, "contacts", "edit", "new"):
        return fill(phone, "name", params["name"]) or fill(phone, "phone", params["phone"]) or press(phone, "save")
    return navigate(phone, "contacts", [Hop("main"), Hop("edit", "add_contact", arg="new")])


def _to_contact_card(phone: Phone, contact_id: str) -> Action | None:
    if is_on(phone, "contacts", "detail", contact_id):
        return None
    return navigate(phone, "contacts", [Hop("main"), Hop("detail", f"contact_{contact_id}", arg=contact_id)])


def _contacts_delete_check(state: PhoneState, params: Params) -> bool:
    others = {c.name for c in _initial().contacts} - {params["name"]}
    return state.contact_named(params["name"]) is None and others <= {c.name for c in state.contacts}


def _contacts_delete_solve(phone: Phone, params: Params) -> Action | None:
    state = phone.state
    contact = state.contact_named(params["name"])
    if contact is None:
        return None
    if state.dialog is not None and state.dialog.kind == "delete_contact" and state.dialog.arg == contact.id:
        return press(phone, "button1")
    route = state.route
    if state.menu_open and route is not None and route.screen == "detail" and route.arg == contact.id:
        return press(phone, "menu_delete")
    return _to_contact_card(phone, contact.id) or press(phone, "more")


def _contacts_favorite_check(state: PhoneState, params: Params) -> bool:
    contact = state.contact_named(params["name"])
    return contact is not None and contact.favorite


def _contacts_favorite_solve(phone: Phone, params: Params) -> Action | None:
    contact = phone.state.contact_named(params["name"])
    if contact is None:
        return None
    return _to_contact_card(phone, contact.id) or set_switch(phone, ("favorite",), True)


def _contact_phone_check(state: PhoneState, params: Params) -> bool:
    contact = _initial().contact_named(params["name"])
    assert contact is not None
    return _normalise(state.answer) == _normalise(contact.phone)


def _contact_phone_solve(phone: Phone, params: Params) -> Action | None:
    contact = phone.state.contact_named(params["name"])
    if contact is None:
        return None
    return _to_contact_card(phone, contact.id) or {"action": "answer", "text": contact.phone}


# --- phone ----------------------------------------------------------------------------------

def _called(state: PhoneState, number: str) -> bool:
    return any(c.outgoing and c.number == number for c in state.calls[len(_initial().calls):])


def _call_contact_check(state: PhoneState, params: Params) -> bool:
    contact = _initial().contact_named(params["name"])
    assert contact is not None
    return _called(state, contact.phone)


def _call_contact_solve(phone: Phone, params: Params) -> Action | None:
    if is_on(phone, "phone", "contacts"):
        return press(phone, f"dial_{_contact_id(params['name'])}")
    return navigate(phone, "phone", [Hop("contacts", "tab_contacts")])


def _dial_check(state: PhoneState, params: Params) -> bool:
    return _called(state, params["number"])


def _dial_solve(phone: Phone, params: Params) -> Action | None:
    if is_on(phone, "phone", "main"):
        return fill(phone, "number", params["number"]) or press(phone, "dial_button")
    return navigate(phone, "phone", [Hop("main", "tab_keypad")])


# --- messages -------------------------------------------------------------------------------

def _message_check(state: PhoneState, params: Params) -> bool:
    return any(m.from_me and m.text == params["text"]
               for m in _new_messages(state, _contact_id(params["contact"])))


def _message_solve(phone: Phone, params: Params) -> Action | None:
    contact_id = _contact_id(params["contact"])
    state = phone.state
    if is_on(phone, "messages", "thread", contact_id):
        return fill(phone, "message", params["text"]) or press(phone, "send")
    if is_on(phone, "messages", "new"):
        return press(phone, f"recipient_{contact_id}") or BACK
    if is_on(phone, "messages", "main"):
        if contact_id in state.threads:
            return press(phone, f"conversation_{contact_id}")
        return press(phone, "start_chat")
    return navigate(phone, "messages", [Hop("main")])


# --- shop -----------------------------------------------------------------------------------

def _to_product(phone: Phone, product_id: str) -> Action | None:
    """Search the product's keyword and open it from the results; None once on its page."""
    product = PRODUCTS[product_id]
    if is_on(phone, "shop", "product", product_id):
        return None
    if is_on(phone, "shop", "results", product.keyword):
        return press(phone, f"result_{product_id}")
    if is_on(phone, "shop", "main"):
        return fill(phone, "search", product.keyword) or press(phone, "search_button")
    return navigate(phone, "shop", [Hop("main")])


def _set_quantity(phone: Phone, quantity: int) -> Action | None:
    route = phone.state.route
    assert route is not None
    current = int(route.fields["qty"])
    if current == quantity:
        return None
    return press(phone, "qty_plus" if current < quantity else "qty_minus")


def _cart_check(state: PhoneState, params: Params) -> bool:
    return state.cart.get(_product_id(params["item"]), 0) == int(params.get("quantity", "1"))


def _cart_solve(phone: Phone, params: Params) -> Action | None:
    product_id = _product_id(params["item"])
    wanted = int(params.get("quantity", "1"))
    have = phone.state.cart.get(product_id, 0)
    if have:  # already in the cart in another quantity: fix it there
        if is_on(phone, "shop", "cart"):
            return press(phone, f"plus_{product_id}" if have < wanted else f"minus_{product_id}")
        return navigate(phone, "shop", [Hop("main"), Hop("cart", "cart")])
    return _to_product(phone, product_id) or _set_quantity(phone, wanted) or press(phone, "add_to_cart")


def _cart_remove_setup(state: PhoneState, params: Params) -> None:
    state.cart = {_product_id(params["item"]): 1, _product_id(params["keep"]): 2}


def _cart_remove_check(state: PhoneState, params: Params) -> bool:
    return _product_id(params["item"]) not in state.cart and state.cart.get(_product_id(params["keep"])) == 2


def _cart_remove_solve(phone: Phone, params: Params) -> Action | None:
    if is_on(phone, "shop", "cart"):
        return press(phone, f"remove_{_product_id(params['item'])}")
    return navigate(phone, "shop", [Hop("main"), Hop("cart", "cart")])


def _like_check(state: PhoneState, params: Params) -> bool:
    return _product_id(params["item"]) in state.favorites


def _like_solve(phone: Phone, params: Params) -> Action | None:
    return _to_product(phone, _product_id(params["item"])) or tap(phone, "product_image", kind="double_tap")


def _order_check(state: PhoneState, params: Params) -> bool:
    return {_product_id(params["item"]): 1} in state.orders


def _order_solve(phone: Phone, params: Params) -> Action | None:
    product_id = _product_id(params["item"])
    if is_on(phone, "shop", "checkout"):
        route = phone.state.route
        assert route is not None
        return press(phone, "place_order") if route.arg == f"{product_id}x1" else BACK
    return _to_product(phone, product_id) or _set_quantity(phone, 1) or press(phone, "buy_now")


def _price_check(state: PhoneState, params: Params) -> bool:
    return _normalise(state.answer) == _normalise(PRODUCTS[_product_id(params["item"])].price)


def _price_solve(phone: Phone, params: Params) -> Action | None:
    product = PRODUCTS[_product_id(params["item"])]
    return _to_product(phone, product.id) or {"action": "answer", "text": product.price}


# --- the registry ---------------------------------------------------------------------------

def _grid(**values: list[str]) -> tuple[Params, ...]:
    keys = list(values)
    return tuple(dict(zip(keys, combo, strict=True)) for combo in product(*values.values()))


ON_OFF = ["on", "off"]
ALARM_TIMES = ["05:45", "06:00", "06:15", "07:15", "07:30", "07:45", "08:30", "10:00", "12:30", "13:15",
               "18:00", "21:45", "22:30", "23:00"]
NOTE_TITLES = ["Groceries", "Packing", "Ideas", "Workout", "Recipes", "Todo"]
NOTE_BODIES = ["milk", "call mom", "pack charger", "buy stamps"]
SHARE_CONTACTS = ["Alice Chen", "Ben Carter", "Grace Hall", "Nina Patel", "Sam Turner", "Zoe Martin"]
NEW_CONTACTS = [("Nora Blake", "555-0141"), ("Omar Haddad", "555-0142"), ("Paula Stone", "555-0143"),
                ("Ravi Kumar", "555-0144"), ("Sara Olsen", "555-0145"), ("Tariq Aziz", "555-0146")]
SOME_CONTACTS = ["Aaron Brooks", "Anna Lee", "Chloe Evans", "Jon Park", "Mario Garcia", "Quinn Taylor",
                 "Victor Hughes", "Zoe Martin"]
MESSAGE_CONTACTS = ["Alice Chen", "Daniel Kim", "Ben Carter", "Hannah Scott", "Maria Garcia", "Jon Park",
                    "Oliver Reed", "Priya Shah", "Yuki Tanaka", "Zoe Martin"]
MESSAGE_TEXTS = ["On my way", "Running late", "Call me back", "See you soon", "Happy birthday!"]
DIAL_NUMBERS = ["555-0199", "555-0142", "555-0177", "555-0188", "555-0155", "555-0166"]
ALL_PRODUCTS = [p.name for p in PRODUCTS.values()]


def _templates() -> list[Template]:
    wifi_on = _toggle_task("wifi", ("wifi_switch", "wifi_master"), NETWORK, on=True)
    wifi_off = _toggle_task("wifi", ("wifi_switch", "wifi_master"), NETWORK, on=False)
    bt_on = _toggle_task("bluetooth", ("bluetooth_switch", "bluetooth_master"), DEVICES, on=True)
    bt_off = _toggle_task("bluetooth", ("bluetooth_switch", "bluetooth_master"), DEVICES, on=False)
    airplane = _toggle_task("airplane", ("airplane_switch",), NETWORK)
    dark = _toggle_task("dark", ("dark_theme_switch",), DISPLAY)
    dnd = _toggle_task("dnd", ("dnd_switch",), SOUND)
    brightness = _slider_task("brightness", "brightness", DISPLAY)
    ring = _slider_task("ring_volume", "ring_volume", SOUND)
    return [
        Template("wifi_on", "Turn on Wi-Fi.", "easy", **wifi_on),
        Template("wifi_off", "Turn off Wi-Fi.", "easy", **wifi_off),
        Template("bluetooth_on", "Turn on Bluetooth.", "easy", **bt_on),
        Template("bluetooth_off", "Turn off Bluetooth.", "easy", **bt_off),
        Template("airplane_mode", "Turn airplane mode {state}.", "easy", grid=_grid(state=ON_OFF), **airplane),
        Template("dark_mode", "Turn the dark theme {state}.", "easy", grid=_grid(state=ON_OFF), **dark),
        Template("do_not_disturb", "Turn Do Not Disturb {state}.", "easy", grid=_grid(state=ON_OFF), **dnd),
        Template("brightness_set", "Set the screen brightness to {level}%.", "medium",
                 grid=_grid(level=[str(v) for v in range(0, 101, 10) if v != 60]), **brightness),
        Template("ring_volume_set", "Set the ring volume to {level}%.", "medium",
                 grid=_grid(level=["0", "20", "40", "50", "60", "80", "100"]), **ring),
        Template("wifi_connect", "Connect to the Wi-Fi network {network}.", "medium", _wifi_connect_check,
                 _wifi_connect_solve, _grid(network=[n for n in catalog.WIFI_NETWORKS if n != "HomeNet"]),
                 _wifi_connect_setup),
        Template("open_app", "Open the {app} app.", "easy", _open_app_check, _open_app_solve,
                 tuple({"app": app} for app in APPS)),
        Template("alarm_create", "Set an alarm for {time}.", "medium", _alarm_create_check, _alarm_create_solve,
                 _grid(time=ALARM_TIMES)),
        Template("alarm_switch", "Turn {state} the {time} alarm.", "medium", _alarm_switch_check,
                 _alarm_switch_solve, ({"time": "06:30", "state": "off"}, {"time": "07:00", "state": "off"},
                                       {"time": "09:30", "state": "on"})),
        Template("alarm_delete", "Delete the {time} alarm.", "medium", _alarm_delete_check, _alarm_delete_solve,
                 _grid(time=["06:30", "07:00", "09:30"])),
        Template("notes_create", 'Create a note titled "{title}" with the text "{body}".', "medium",
                 _notes_create_check, _notes_create_solve, _grid(title=NOTE_TITLES, body=NOTE_BODIES)),
        Template("notes_delete", 'Delete the note "{title}".', "medium", _notes_delete_check,
                 _notes_delete_solve, _grid(title=[title for title, _ in catalog.NOTES])),
        Template("notes_share", 'Create a note titled "{title}" with the text "{body}", then share it with '
                 "{contact}.", "hard", _notes_share_check, _notes_share_solve,
                 _grid(title=NOTE_TITLES[:2], body=NOTE_BODIES[:2], contact=SHARE_CONTACTS)),
        Template("contacts_add", "Add a contact named {name} with the number {phone}.", "medium",
                 _contacts_add_check, _contacts_add_solve,
                 tuple({"name": n, "phone": p} for n, p in NEW_CONTACTS)),
        Template("contacts_delete", "Delete the contact {name}.", "medium", _contacts_delete_check,
                 _contacts_delete_solve, _grid(name=SOME_CONTACTS)),
        Template("contacts_favorite", "Add {name} to favourite contacts.", "medium", _contacts_favorite_check,
                 _contacts_favorite_solve, _grid(name=SOME_CONTACTS)),
        Template("contact_phone", "What is the phone number of {name}? Answer with the number.", "medium",
                 _contact_phone_check, _contact_phone_solve,
                 _grid(name=list(dict.fromkeys(SOME_CONTACTS[:4] + MESSAGE_CONTACTS[:7])))),
        Template("call_contact", "Call {name}.", "medium", _call_contact_check, _call_contact_solve,
                 _grid(name=[name for name, _ in catalog.CONTACTS])),
        Template("dial_number", "Call the number {number}.", "medium", _dial_check, _dial_solve,
                 _grid(number=DIAL_NUMBERS)),
        Template("message_send", 'Send {contact} the message "{text}".', "hard", _message_check, _message_solve,
                 _grid(contact=MESSAGE_CONTACTS, text=MESSAGE_TEXTS)),
        Template("shop_add_to_cart", "Add one {item} to the shopping cart.", "medium", _cart_check, _cart_solve,
                 _grid(item=ALL_PRODUCTS)),
        Template("shop_add_quantity", "Put {quantity} of {item} in the shopping cart.", "hard", _cart_check,
                 _cart_solve, _grid(item=ALL_PRODUCTS[:8], quantity=["2", "3"])),
        Template("shop_remove_from_cart", "Remove {item} from the shopping cart.", "medium", _cart_remove_check,
                 _cart_remove_solve, ({"item": "Coffee Mug", "keep": "Desk Lamp"},
                                      {"item": "Smart Watch", "keep": "Coffee Mug"},
                                      {"item": "USB-C Cable 1m", "keep": "USB-C Cable 2m"},
                                      {"item": "Phone Case Blue", "keep": "Phone Case Black"}),
                 _cart_remove_setup),
        Template("shop_like", "Like the {item} in the shop.", "medium", _like_check, _like_solve,
                 _grid(item=ALL_PRODUCTS[::3])),
        Template("shop_order", "Order one {item} from the shop.", "hard", _order_check, _order_solve,
                 _grid(item=ALL_PRODUCTS[1::3])),
        Template("product_price", "How much does the {item} cost in the shop? Answer with the price.", "medium",
                 _price_check, _price_solve, _grid(item=ALL_PRODUCTS[2::3])),
    ]


TEMPLATES: dict[str, Template] = {t.name: t for t in _templates()}


@cache
def all_tasks() -> tuple[Task, ...]:
    """Every registered task, template by template."""
    return tuple(Task(template, tuple(params.items())) for template in TEMPLATES.values()
                 for params in template.grid)


@cache
def _by_id() -> dict[str, Task]:
    return {task.id: task for task in all_tasks()}


def get_task(task_id: str) -> Task:
    """The task with this id, e.g. ``get_task("wifi_on")`` or
    ``get_task("notes_create[title=Groceries,body=milk]")``."""
    task = _by_id().get(task_id)
    if task is not None:
        return task
    match = TASK_ID.match(task_id)
    name = match.group("name") if match else task_id
    if name not in TEMPLATES:
        raise KeyError(f"unknown task template {name!r}; templates: {', '.join(TEMPLATES)}")
    examples = [t.id for t in all_tasks() if t.name == name][:3]
    raise KeyError(f"no task {task_id!r}; {name} is registered with parameters like: {'; '.join(examples)}")


@cache
def _by_goal() -> dict[str, Task]:
    return {task.goal: task for task in all_tasks()}


def task_for_goal(goal: str) -> Task:
    """The task whose goal text this is (goals are unique)."""
    task = _by_goal().get(goal)
    if task is None:
        raise KeyError(f"no simulated task has the goal {goal!r}")
    return task


def sample_tasks(n: int, seed: int = 0) -> list[Task]:
    """``n`` distinct tasks, spread over templates: templates are visited round-robin in a
    seeded order, each giving its next task in a seeded order."""
    tasks = all_tasks()
    if n > len(tasks):
        raise ValueError(f"asked for {n} tasks; {len(tasks)} are registered")
    rng = random.Random(seed)
    queues: dict[str, list[Task]] = {}
    for task in tasks:
        queues.setdefault(task.name, []).append(task)
    for queue in queues.values():
        rng.shuffle(queue)
    names = list(queues)
    rng.shuffle(names)
    picked: list[Task] = []
    while len(picked) < n:
        for name in names:
            if queues[name] and len(picked) < n:
                picked.append(queues[name].pop())
    return picked
