"""What a task is (:class:`Template`, :class:`Task`) and what every app's tasks share: the
phone's starting world to compare against, lookups that name the parameter they could not
resolve, and the oracle steps several apps take the same way.

A template is checked when it is defined: a bad difficulty, a parameter value that would
break the task id, or a goal naming a parameter its grid lacks is :class:`InvalidInput`
naming the template and the field, never an ``assert`` (which ``python -O`` drops).
"""

from __future__ import annotations

import logging
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from itertools import product

from episodelake.collectors.envs.sim.apps.clock import parse_time
from episodelake.collectors.envs.sim.navigation import Action, Hop, is_on, navigate, press, tap
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import (
    PRODUCTS,
    Alarm,
    Contact,
    Message,
    PhoneState,
    initial_state,
)
from episodelake.lake.storage.errors import InvalidInput

log = logging.getLogger(__name__)

Params = dict[str, str]
DIFFICULTIES = ("easy", "medium", "hard", "long")
TERMINATE_SUCCESS: Action = {"action": "terminate", "status": "success"}
TERMINATE_FAIL: Action = {"action": "terminate", "status": "fail"}

#: Characters a parameter value may not contain, because task ids are ``name[k=v,k=v]``.
RESERVED = set(",=[]")
TASK_ID = re.compile(r"^(?P<name>[a-z0-9_]+)(?:\[(?P<params>.*)\])?$")
TEMPLATE_NAME = re.compile(r"^[a-z0-9_]+$")


@dataclass(frozen=True)
class Template:
    """A kind of task. ``grid`` lists every parameter combination it is registered with;
    ``setup``, ``check`` and ``solve`` get the phone (or its state) and the parameters.

    ``held_out`` names the grid entries that form the template's held-out split (values never
    in a training task); empty leaves the split to the trainer (a seeded share of the grid)."""

    name: str
    goal: str
    difficulty: str
    check: Callable[[PhoneState, Params], bool]
    solve: Callable[[Phone, Params], Action | None]
    grid: tuple[Params, ...] = ({},)
    setup: Callable[[PhoneState, Params], None] | None = None
    held_out: tuple[Params, ...] = ()

    def __post_init__(self) -> None:
        if not TEMPLATE_NAME.match(self.name):
            raise InvalidInput(f"template name {self.name!r}: use lower-case letters, digits and _ "
                               "(it starts every task id)")
        if self.difficulty not in DIFFICULTIES:
            raise InvalidInput(f"template {self.name}: difficulty {self.difficulty!r} is not one of "
                               f"{', '.join(DIFFICULTIES)}")
        named = {name for _, name, _, _ in string.Formatter().parse(self.goal) if name}
        for params in self.grid:
            for key, value in params.items():
                if RESERVED & set(key + value):
                    raise InvalidInput(f"template {self.name}: grid parameter {key}={value!r} holds one of "
                                       f"{''.join(sorted(RESERVED))} (task ids are name[key=value,...])")
            if named - set(params):
                raise InvalidInput(f"template {self.name}: goal names {', '.join(sorted(named - set(params)))}, "
                                   f"which grid entry {params} does not give")
        if stray := [params for params in self.held_out if params not in self.grid]:
            raise InvalidInput(f"template {self.name}: held_out entry {stray[0]} is not in its grid")


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

    @property
    def split(self) -> str | None:
        """``held_out`` or ``train`` where the template fixes its split, else None."""
        if not self.template.held_out:
            return None
        return "held_out" if dict(self.params) in self.template.held_out else "train"

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


def grid(**values: list[str]) -> tuple[Params, ...]:
    """Every combination of the given parameter values, in order."""
    keys = list(values)
    return tuple(dict(zip(keys, combo, strict=True)) for combo in product(*values.values()))


# --- the starting world, and lookups in it ----------------------------------------------------

@cache
def initial() -> PhoneState:
    """The state every phone starts from: what checks compare against ("the other notes are
    still there", "a message sent since the start")."""
    return initial_state(0)


def contact(params: Params, key: str) -> Contact:
    """The starting address book's contact named by parameter `key`."""
    found = initial().contact_named(params[key])
    if found is None:
        raise InvalidInput(f"{key}: {params[key]!r} is not a contact on the simulated phone")
    return found


def product_id(params: Params, key: str = "item") -> str:
    """The shop's product named by parameter `key`."""
    found = next((p.id for p in PRODUCTS.values() if p.name == params[key]), None)
    if found is None:
        raise InvalidInput(f"{key}: {params[key]!r} is not a product of the simulated shop")
    return found


def alarm_at(state: PhoneState, params: Params, key: str = "time") -> Alarm | None:
    """The alarm set for the time in parameter `key`, if there is one."""
    parsed = parse_time(params[key])
    if parsed is None:
        raise InvalidInput(f"{key}: {params[key]!r} is not a 24-hour time (HH:MM)")
    return next((a for a in state.alarms if (a.hour, a.minute) == parsed), None)


def new_messages(state: PhoneState, contact_id: str) -> list[Message]:
    """Messages of the thread with `contact_id` since the phone started."""
    before = len(initial().threads.get(contact_id, []))
    return state.threads.get(contact_id, [])[before:]


def normalise(text: str | None) -> str:
    """An answer as compared: lower-case digits, letters and dots only."""
    return re.sub(r"[^0-9a-z.]", "", (text or "").lower())


# --- oracle steps several apps share ----------------------------------------------------------

def confirming(state: PhoneState, dialog: str, item_id: str) -> bool:
    """Whether the `dialog` confirmation for `item_id` is open."""
    return state.dialog is not None and state.dialog.kind == dialog and state.dialog.arg == item_id


def delete_from_list(phone: Phone, app: str, dialog: str, item_id: str, row: str) -> Action | None:
    """Delete an item the way lists do it: long-press its row on the app's main screen, then
    confirm the dialog."""
    if confirming(phone.state, dialog, item_id):
        return press(phone, "button1")
    if is_on(phone, app, "main"):
        return tap(phone, row, kind="long_press")
    return navigate(phone, app, [Hop("main")])
