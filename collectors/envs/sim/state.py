"""The simulated phone's whole state: plain data, deep-copyable, with no drawing in it.

Everything a task checks and everything a screen shows derives from one ``PhoneState``, so
a snapshot (``copy.deepcopy``) is enough to replay the oracle from any point (the step
judge does exactly that). Collections are lists and dicts, never sets, so that iteration
order, and with it every rendered frame, is the same in every process.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from episodelake.collectors.envs.sim import catalog

#: App ids in home-screen order, with the names shown under their icons.
APPS: dict[str, str] = {
    "settings": "Settings",
    "clock": "Clock",
    "notes": "Notes",
    "contacts": "Contacts",
    "phone": "Phone",
    "messages": "Messages",
    "shop": "Shop",
}

#: Seconds of simulated time that one step takes; ``wait`` takes ``WAIT_SECONDS`` more.
STEP_SECONDS = 35
WAIT_SECONDS = 60


@dataclass
class Contact:
    id: str
    name: str
    phone: str
    favorite: bool = False


@dataclass
class Note:
    id: str
    title: str
    body: str


@dataclass
class Alarm:
    id: str
    hour: int
    minute: int
    label: str
    enabled: bool = True

    @property
    def time(self) -> str:
        return f"{self.hour:02d}:{self.minute:02d}"


@dataclass
class Message:
    from_me: bool
    text: str


@dataclass
class Call:
    number: str
    outgoing: bool


@dataclass
class Settings:
    wifi: bool = True
    wifi_network: str = "HomeNet"
    wifi_calling: bool = False
    mobile_data: bool = True
    airplane: bool = False
    bluetooth: bool = False
    nfc: bool = False
    dark: bool = False
    adaptive_brightness: bool = True
    brightness: int = 60
    ring_volume: int = 70
    media_volume: int = 50
    dnd: bool = False
    vibrate: bool = True


@dataclass
class Route:
    """One screen on an app's back stack, with the screen's own transient state.

    ``fields`` holds the text of the screen's input fields (drafts), ``scroll`` the offset of
    its scrolling list in logical pixels.
    """

    app: str
    screen: str
    arg: str = ""
    scroll: int = 0
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        base = f"{self.app}/{self.screen}"
        return f"{base}:{self.arg}" if self.arg else base


@dataclass
class Dialog:
    """A modal dialog over the current screen; its app decides what ``kind`` shows."""

    kind: str
    arg: str = ""


@dataclass
class PhoneState:
    clock_s: int
    battery: int
    settings: Settings = field(default_factory=Settings)
    contacts: list[Contact] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    alarms: list[Alarm] = field(default_factory=list)
    threads: dict[str, list[Message]] = field(default_factory=dict)  # contact id -> messages
    calls: list[Call] = field(default_factory=list)
    cart: dict[str, int] = field(default_factory=dict)  # product id -> quantity
    favorites: list[str] = field(default_factory=list)  # product ids
    orders: list[dict[str, int]] = field(default_factory=list)
    active_call: str | None = None
    stacks: dict[str, list[Route]] = field(default_factory=dict)  # app -> back stack
    foreground: str | None = None  # None: the launcher
    drawer: bool = False  # the launcher's all-apps drawer is open
    focus: str | None = None  # name of the focused field of the current route
    dialog: Dialog | None = None
    menu_open: bool = False
    shift: bool = False
    symbols: bool = False
    toast: str | None = None
    answer: str | None = None
    terminated: str | None = None
    next_id: int = 100  # above the ids of the initial records

    # --- navigation -------------------------------------------------------------------

    @property
    def route(self) -> Route | None:
        """The route on screen, or None on the launcher."""
        if self.foreground is None:
            return None
        return self.stacks[self.foreground][-1]

    def push(self, app: str, screen: str, arg: str = "", **fields: str) -> Route:
        """Open a screen on top of `app`'s stack; `fields` are its input fields' first text
        (an editor opened on an existing item holds the item's values as its draft)."""
        self._leave_screen()
        route = Route(app, screen, arg, fields=dict(fields))
        self.stacks.setdefault(app, []).append(route)
        return route

    def back(self) -> None:
        """Leave the current screen; leaving an app's last screen returns to the launcher."""
        self._leave_screen()
        if self.foreground is None:
            self.drawer = False
            return
        stack = self.stacks[self.foreground]
        stack.pop()
        if not stack:
            del self.stacks[self.foreground]
            self.foreground = None

    def go_home(self) -> None:
        self._leave_screen()
        self.foreground = None
        self.drawer = False

    def open_app(self, app: str) -> None:
        """Bring an app to the front, resuming its back stack as Android does."""
        self._leave_screen()
        self.drawer = False
        self.foreground = app
        if not self.stacks.get(app):
            self.stacks[app] = [Route(app, "main")]

    def replace(self, screen: str, arg: str = "") -> Route:
        """Swap the current screen for another of the same app (no back-stack entry)."""
        assert self.foreground is not None
        self._leave_screen()
        route = Route(self.foreground, screen, arg)
        self.stacks[self.foreground][-1] = route
        return route

    def close_deleted(self, screen: str) -> None:
        """After an item is deleted from its confirmation dialog: the dialog closes and, if
        the current screen is the item's own `screen` (its editor, its card), it is left."""
        self.dialog = None
        route = self.route
        if route is not None and route.screen == screen:
            self.back()

    def _leave_screen(self) -> None:
        self.focus = None
        self.dialog = None
        self.menu_open = False
        self.shift = False
        self.symbols = False

    # --- shared actions -------------------------------------------------------------------

    def send_message(self, contact_id: str, text: str) -> None:
        """Appends a sent message; its conversation moves to the top of the list."""
        messages = self.threads.pop(contact_id, [])
        messages.append(Message(True, text))
        self.threads[contact_id] = messages

    def start_call(self, number: str) -> None:
        """Dials a number: logs the call and brings the in-call screen to the front."""
        self.calls.append(Call(number, True))
        self.active_call = number
        self.open_app("phone")
        self.push("phone", "call", number)

    # --- lookups ----------------------------------------------------------------------

    def new_id(self, prefix: str) -> str:
        ident = f"{prefix}{self.next_id}"
        self.next_id += 1
        return ident

    def contact(self, contact_id: str) -> Contact | None:
        return next((c for c in self.contacts if c.id == contact_id), None)

    def contact_named(self, name: str) -> Contact | None:
        return next((c for c in self.contacts if c.name == name), None)

    def contact_for_number(self, number: str) -> Contact | None:
        return next((c for c in self.contacts if c.phone == number), None)

    def note(self, note_id: str) -> Note | None:
        return next((n for n in self.notes if n.id == note_id), None)

    def alarm(self, alarm_id: str) -> Alarm | None:
        return next((a for a in self.alarms if a.id == alarm_id), None)

    @property
    def clock_text(self) -> str:
        minutes = self.clock_s // 60
        return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"


@dataclass(frozen=True)
class Product:
    id: str
    name: str
    price_cents: int
    keyword: str
    featured: bool

    @property
    def price(self) -> str:
        return f"${self.price_cents // 100}.{self.price_cents % 100:02d}"


PRODUCTS: dict[str, Product] = {p[0]: Product(*p) for p in catalog.PRODUCTS}


def initial_state(seed: int) -> PhoneState:
    """The phone as it is at the start of every episode; the seed sets only the clock and
    the battery, so that screenshots of the same screen differ between episodes exactly as
    they do on real devices (in the status bar)."""
    rng = random.Random(seed)
    state = PhoneState(clock_s=6 * 3600 + rng.randrange(14 * 3600), battery=rng.randint(31, 97))
    state.contacts = [Contact(f"c{i:02d}", name, phone)
                      for i, (name, phone) in enumerate(catalog.CONTACTS, start=1)]
    state.notes = [Note(f"n{i}", title, body)
                   for i, (title, body) in enumerate(catalog.NOTES, start=1)]
    state.alarms = [Alarm(f"a{i}", hour, minute, label, enabled)
                    for i, (hour, minute, label, enabled) in enumerate(catalog.ALARMS, start=1)]
    for name, messages in catalog.THREADS:
        contact = state.contact_named(name)
        assert contact is not None, name
        state.threads[contact.id] = [Message(from_me, text) for from_me, text in messages]
    state.calls = [Call(number, outgoing) for number, outgoing in catalog.CALLS]
    return state
