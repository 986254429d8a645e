"""Long tasks (difficulty ``long``): 8-20 oracle steps, where credit assignment matters.

Each template chains sub-goals of the apps' own tasks, done in the order the goal names
them, so an episode goes back and forth through the same screens (the settings list between
two of its pages, the contact list between two cards, the empty contact form twice). That is
the setting in which GiGPO's step-level groups should beat GRPO's episode-level signal (the
GiGPO paper's ALFWorld and WebShop: long horizons, sparse final reward, states that recur
within a group), and which the easy tasks (2-4 steps) never show.

Every template splits its values in two (``held_out``): training tasks use one pool, held-out
tasks only values never trained on (names, toggles), so held-out success measures whether a
policy grounds an unseen goal word in what the screen shows rather than memorising where a
trained word was tapped. ``STEPS`` states each template's oracle length (terminate included)
from the starting state; tests check it.

Why each template is here:

- ``settings_tour`` (10 steps): navigation back and forth. Three switches on three pages of
  Settings, in the goal's order; the settings list recurs between the pages, and which row to
  open there depends on what is already done. Held out: NFC, Do Not Disturb, mobile data,
  never toggled in training, but named by the list's subtitles ("Bluetooth, NFC").
- ``favourite_contacts`` (10-12 steps): a list and its cards. Three contacts starred from
  the contact list, which recurs between the cards; "Anna Lee" sits next to "Anna Li". Held
  out: three names never tapped in training, found only by reading the list.
- ``contacts_add_two`` (15 steps): a multi-field form, twice. The empty form recurs, and
  each field is typed from the goal. Held out: names and numbers never typed in training.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations, permutations

from episodelake.collectors.envs.sim import navigation as nav
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import PhoneState
from episodelake.collectors.envs.sim.tasks.base import Params, Template

Check = Callable[[PhoneState, Params], bool]
Solve = Callable[[Phone, Params], nav.Action | None]
ORDINALS = ("first", "second", "third")

SETTINGS_MAIN = [nav.Hop("main")]
#: Switches of the settings pages, by the words a goal uses: (state attribute, switch, page).
TOGGLES: dict[str, tuple[str, str, list[nav.Hop]]] = {
    "Wi-Fi calling": ("wifi_calling", "wifi_calling_switch", [*SETTINGS_MAIN, nav.Hop("network", "network")]),
    "Bluetooth": ("bluetooth", "bluetooth_switch", [*SETTINGS_MAIN, nav.Hop("devices", "devices")]),
    "dark theme": ("dark", "dark_theme_switch", [*SETTINGS_MAIN, nav.Hop("display", "display")]),
    "vibrate for calls": ("vibrate", "vibrate_switch", [*SETTINGS_MAIN, nav.Hop("sound", "sound")]),
    "NFC": ("nfc", "nfc_switch", [*SETTINGS_MAIN, nav.Hop("devices", "devices")]),
    "Do Not Disturb": ("dnd", "dnd_switch", [*SETTINGS_MAIN, nav.Hop("sound", "sound")]),
    "mobile data": ("mobile_data", "mobile_data_switch", [*SETTINGS_MAIN, nav.Hop("network", "network")]),
}
TRAIN_TOGGLES = ("Wi-Fi calling", "Bluetooth", "dark theme", "vibrate for calls")
HELD_OUT_TOGGLES = ("NFC", "Do Not Disturb", "mobile data")

#: Contacts of the list's first screen; "Anna Lee" next to "Anna Li" is the distractor.
TRAIN_FAVOURITES = ("Aaron Brooks", "Alice Chen", "Anna Lee", "Ben Carter", "Chloe Evans", "Daniel Kim")
HELD_OUT_FAVOURITES = ("Anna Li", "Carlos Diaz", "David Nguyen")

TRAIN_NEW_CONTACTS = (("Nora Blake", "555-0141"), ("Omar Haddad", "555-0142"), ("Paula Stone", "555-0143"),
                      ("Ravi Kumar", "555-0144"))
HELD_OUT_NEW_CONTACTS = (("Uma Reyes", "555-0151"), ("Felix Wong", "555-0152"), ("Lena Vogel", "555-0153"))

#: Oracle steps of each template's tasks from their starting state, the final terminate
#: included, as (fewest, most): a favourite row low on the list costs a swipe or two.
STEPS = {"settings_tour": (10, 10), "favourite_contacts": (10, 12), "contacts_add_two": (15, 15)}


def in_order(parts: Sequence[tuple[Check, Solve]]) -> tuple[Check, Solve]:
    """One task from sub-goals done in order: it holds when every part holds, and the oracle
    works on the first part that does not hold yet (so it never undoes an earlier one)."""

    def check(state: PhoneState, params: Params) -> bool:
        return all(part_check(state, params) for part_check, _ in parts)

    def solve(phone: Phone, params: Params) -> nav.Action | None:
        for part_check, part_solve in parts:
            if not part_check(phone.state, params):
                return part_solve(phone, params)
        return None

    return check, solve


# --- settings_tour: three switches on two or three pages of Settings -------------------------

def _switch_on(key: str) -> tuple[Check, Solve]:
    """Turn on the switch named by parameter `key` (a TOGGLES name)."""

    def check(state: PhoneState, params: Params) -> bool:
        return bool(getattr(state.settings, TOGGLES[params[key]][0]))

    def solve(phone: Phone, params: Params) -> nav.Action | None:
        _, switch, page = TOGGLES[params[key]]
        if phone.state.foreground == "settings" and nav.find(phone, switch) is not None:
            return nav.set_switch(phone, (switch,), True)
        return nav.navigate(phone, "settings", page)

    return check, solve


def _switches_off(state: PhoneState, params: Params) -> None:
    state.settings.airplane = False
    for key in ORDINALS:
        setattr(state.settings, TOGGLES[params[key]][0], False)


def _tours(names: Sequence[str]) -> tuple[Params, ...]:
    """Ordered triples of switches on three different pages (no two on one page)."""
    return tuple(dict(zip(ORDINALS, triple, strict=True)) for triple in permutations(names, 3)
                 if len({TOGGLES[name][2][-1].screen for name in triple}) == 3)


# --- favourite_contacts: three cards reached from the same list ------------------------------

def _favourite(key: str) -> tuple[Check, Solve]:
    def check(state: PhoneState, params: Params) -> bool:
        found = state.contact_named(params[key])
        return found is not None and found.favorite

    def solve(phone: Phone, params: Params) -> nav.Action | None:
        found = phone.state.contact_named(params[key])
        if found is None:
            return None
        if not nav.is_on(phone, "contacts", "detail", found.id):
            return nav.navigate(phone, "contacts", [nav.Hop("main"),
                                                    nav.Hop("detail", f"contact_{found.id}", arg=found.id)])
        return nav.set_switch(phone, ("favorite",), True)

    return check, solve


def _triples(names: Sequence[str], ordered: bool = False) -> tuple[Params, ...]:
    """Triples of names, in list order (or in every order: the three held-out names make one
    set, so its six orders are the held-out tasks)."""
    picked = permutations(names, 3) if ordered else combinations(names, 3)
    return tuple(dict(zip(ORDINALS, triple, strict=True)) for triple in picked)


# --- contacts_add_two: the same form filled twice ---------------------------------------------

def _added(key: str) -> tuple[Check, Solve]:
    def check(state: PhoneState, params: Params) -> bool:
        return any(c.name == params[key] and c.phone == params[f"{key}_phone"] for c in state.contacts)

    def solve(phone: Phone, params: Params) -> nav.Action | None:
        if nav.is_on(phone, "contacts", "edit", "new"):
            return (nav.fill(phone, "name", params[key]) or nav.fill(phone, "phone", params[f"{key}_phone"])
                    or nav.press(phone, "save"))
        return nav.navigate(phone, "contacts", [nav.Hop("main"), nav.Hop("edit", "add_contact", arg="new")])

    return check, solve


def _pairs(people: Sequence[tuple[str, str]]) -> tuple[Params, ...]:
    return tuple({"first": a, "first_phone": pa, "second": b, "second_phone": pb}
                 for (a, pa), (b, pb) in permutations(people, 2))


def _template(name: str, goal: str, parts: Sequence[tuple[Check, Solve]], train: tuple[Params, ...],
              held_out: tuple[Params, ...], setup: Callable[[PhoneState, Params], None] | None = None) -> Template:
    check, solve = in_order(parts)
    return Template(name, goal, "long", check, solve, train + held_out, setup, held_out=held_out)


TEMPLATES = [
    # Settings' list between three of its pages: the list screen recurs three times per episode,
    # and which page to open next depends on what is already done (the goal's order); the
    # held-out switches (NFC, Do Not Disturb, mobile data) are never trained on in this template,
    # but the list's subtitles name them ("Bluetooth, NFC", "Volume, Do Not Disturb").
    _template("settings_tour", "Turn on {first}, then {second}, then {third}.",
              [_switch_on(key) for key in ORDINALS], _tours(TRAIN_TOGGLES),
              _tours(HELD_OUT_TOGGLES),
              _switches_off),
    # A list and its cards, back and forth: the contact list recurs between cards, the right
    # row sits next to a near-duplicate ("Anna Lee", "Anna Li"), and the held-out names are
    # rows never tapped in training: only reading the list finds them.
    _template("favourite_contacts", "Add {first}, {second} and {third} to favourite contacts.",
              [_favourite(key) for key in ORDINALS], _triples(TRAIN_FAVOURITES),
              _triples(HELD_OUT_FAVOURITES, ordered=True)),
    # A multi-field form twice: the empty form recurs, each field is typed from the goal (the
    # values' context, "the number ..."), and the held-out names and numbers are never typed in
    # training.
    _template("contacts_add_two", "Add two contacts: {first} with the number {first_phone}, and {second} "
              "with the number {second_phone}.", [_added("first"), _added("second")],
              _pairs(TRAIN_NEW_CONTACTS), _pairs(HELD_OUT_NEW_CONTACTS)),
]
