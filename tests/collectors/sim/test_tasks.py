"""Tasks: the registry, the oracle (it solves everything, and recovers from detours), and
success checks that refuse near misses."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from episodelake.collectors.envs.sim.navigation import tap
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import Alarm, Note
from episodelake.collectors.envs.sim.tasks import (
    DIFFICULTIES,
    TEMPLATES,
    Task,
    Template,
    all_tasks,
    get_task,
    sample_tasks,
    task_for_goal,
)
from episodelake.lake.storage.errors import InvalidInput, NotFound


def test_registry_has_enough_templates_and_tasks():
    tasks = all_tasks()
    assert len(TEMPLATES) >= 20 and len(tasks) >= 200
    assert len({t.id for t in tasks}) == len(tasks)
    assert len({t.goal for t in tasks}) == len(tasks), "goals must be unique (the judge looks tasks up by goal)"
    assert {t.difficulty for t in tasks} == set(DIFFICULTIES)


def test_ids_round_trip():
    for task in all_tasks():
        assert get_task(task.id) is task
    task = get_task("notes_create[title=Groceries,body=milk]")
    assert task.name == "notes_create" and dict(task.params) == {"title": "Groceries", "body": "milk"}
    assert task.goal == 'Create a note titled "Groceries" with the text "milk".'
    assert task_for_goal(task.goal) is task


def test_unknown_ids_say_what_exists():
    with pytest.raises(NotFound, match="templates: wifi_on"):
        get_task("teleport")
    with pytest.raises(NotFound, match="notes_create\\[title="):
        get_task("notes_create[title=Nope,body=milk]")


def test_sample_tasks_is_distinct_varied_and_seeded():
    sample = sample_tasks(40, seed=1)
    assert len({t.id for t in sample}) == 40
    assert len({t.name for t in sample}) >= 20
    assert [t.id for t in sample] == [t.id for t in sample_tasks(40, seed=1)]
    assert [t.id for t in sample] != [t.id for t in sample_tasks(40, seed=2)]
    with pytest.raises(InvalidInput, match=rf"tasks: asked for {len(all_tasks()) + 1}; \d+ are registered"):
        sample_tasks(len(all_tasks()) + 1)


def test_oracle_solves_every_task(oracle_runs):
    failed = [run.task.id for run in oracle_runs if not run.success]
    assert not failed
    assert not [run.task.id for run in oracle_runs if run.invalid]
    assert all(run.actions[-1] == {"action": "terminate", "status": "success"} for run in oracle_runs)
    steps = {run.task.name: len(run.actions) for run in oracle_runs}
    assert min(steps.values()) <= 2 and max(steps.values()) >= 10  # one-step to long


def test_tasks_do_not_start_solved():
    for i, task in enumerate(all_tasks()):
        phone = Phone(i)
        task.setup(phone)
        assert not task.check(phone), task.id


@pytest.mark.parametrize("task_id", [
    "wifi_on", "alarm_create[time=07:30]", "message_send[contact=Jon Park,text=On my way]",
    "shop_add_quantity[item=USB-C Cable 1m,quantity=3]", "contacts_delete[name=Anna Lee]",
])
def test_oracle_recovers_from_detours(task_id):
    task = get_task(task_id)
    phone = Phone(3)
    task.setup(phone)
    for detour in ({"action": "open", "text": "Shop"}, {"action": "swipe", "direction": "up"},
                   {"action": "system_button", "button": "back"}):
        phone.step(task.solution(phone))
        phone.step(detour)
    for _ in range(40):
        if phone.step(task.solution(phone)).done:
            break
    assert phone.state.terminated == "success" and task.check(phone)


def _solved(task_id: str, edit) -> bool:
    """Whether the task's check accepts the phone after ``edit`` changed its state."""
    task = get_task(task_id)
    phone = Phone(0)
    task.setup(phone)
    edit(phone.state)
    return task.check(phone)


@pytest.mark.parametrize(("task_id", "right", "near_miss"), [
    ("wifi_on", lambda s: setattr(s.settings, "wifi", True),
     lambda s: setattr(s.settings, "wifi_calling", True)),
    ("brightness_set[level=70]", lambda s: setattr(s.settings, "brightness", 70),
     lambda s: setattr(s.settings, "brightness", 75)),
    ("alarm_create[time=07:30]", lambda s: s.alarms.append(Alarm("x", 7, 30, "Alarm")),
     lambda s: s.alarms.append(Alarm("x", 7, 35, "Alarm"))),
    ("alarm_create[time=07:30]", lambda s: s.alarms.append(Alarm("x", 7, 30, "Alarm")),
     lambda s: s.alarms.append(Alarm("x", 7, 30, "Alarm", enabled=False))),
    ("notes_create[title=Groceries,body=milk]", lambda s: s.notes.append(Note("x", "Groceries", "milk")),
     lambda s: s.notes.append(Note("x", "Groceries", ""))),
    ("notes_create[title=Groceries,body=milk]", lambda s: s.notes.append(Note("x", "Groceries", "milk")),
     lambda s: s.notes.append(Note("x", "Grocery", "milk"))),
    ("notes_delete[title=Gift ideas]", lambda s: s.notes.pop(3), lambda s: s.notes.clear()),
    ("call_contact[name=Anna Lee]", lambda s: s.start_call("555-0103"), lambda s: s.start_call("555-0130")),
    ("message_send[contact=Jon Park,text=On my way]", lambda s: s.send_message("c18", "On my way"),
     lambda s: s.send_message("c17", "On my way")),
    ("message_send[contact=Jon Park,text=On my way]", lambda s: s.send_message("c18", "On my way"),
     lambda s: s.send_message("c18", "On my way!")),
    ("shop_add_to_cart[item=USB-C Cable 1m]", lambda s: s.cart.update(p01=1), lambda s: s.cart.update(p02=1)),
    ("shop_add_quantity[item=USB-C Cable 1m,quantity=3]", lambda s: s.cart.update(p01=3),
     lambda s: s.cart.update(p01=2)),
    ("contacts_delete[name=Anna Lee]", lambda s: s.contacts.pop(2), lambda s: s.contacts.pop(3)),
    ("contact_phone[name=Anna Lee]", lambda s: setattr(s, "answer", "555 0103"),
     lambda s: setattr(s, "answer", "555-0130")),
    ("open_app[app=clock]", lambda s: s.open_app("clock"), lambda s: s.open_app("contacts")),
])
def test_checks_accept_the_goal_and_reject_near_misses(task_id, right, near_miss):
    assert _solved(task_id, right)
    assert not _solved(task_id, near_miss)


def test_the_shared_note_must_be_the_one_created():
    task = get_task("notes_share[title=Groceries,body=milk,contact=Zoe Martin]")
    phone = Phone(0)
    task.setup(phone)
    phone.state.notes.append(Note("x", "Groceries", "milk"))
    phone.state.send_message("c34", "Shopping list: eggs and bread")  # another note
    assert not task.check(phone)
    phone.state.send_message("c34", "Groceries: milk")
    assert task.check(phone)


def test_distractors_exist():
    """Similar-looking targets next to the real ones, and targets below the fold."""
    phone = Phone(0)
    phone.step({"action": "open", "text": "Contacts"})
    screen = phone.screen()
    assert screen.find("contact_c03").visible is not None and screen.find("contact_c04").visible is not None
    assert screen.find("contact_c34").visible is None
    phone.step(tap(phone, "search"))
    assert phone.state.focus == "search"
    phone = Phone(0)
    phone.step({"action": "open", "text": "Shop"})
    phone.step(tap(phone, "featured_p01"))
    assert phone.screen().find("buy_now") is not None and phone.screen().find("add_to_cart") is not None


# --- bad task definitions: InvalidInput naming the field, with or without `python -O` --------

def _never(*_):
    return None


@pytest.mark.parametrize("kwargs, field", [
    ({"name": "Wifi On!"}, "template name 'Wifi On!'"),
    ({"difficulty": "trivial"}, "difficulty 'trivial'"),
    ({"grid": ({"title": "a,b"},)}, "grid parameter title='a,b'"),
    ({"grid": ({"body": "milk"},)}, "goal names title"),
])
def test_a_bad_template_is_invalid_input_naming_the_field(kwargs, field):
    spec = {"name": "notes_x", "goal": 'Create a note titled "{title}".', "difficulty": "easy",
            "check": _never, "solve": _never, "grid": ({"title": "Groceries"},), **kwargs}
    with pytest.raises(InvalidInput, match=re.escape(field)):
        Template(**spec)


def test_template_checks_hold_under_python_dash_o():
    # `assert` would be stripped by -O and the bad difficulty accepted without a word
    code = ("from episodelake.collectors.envs.sim.tasks import Template\n"
            "from episodelake.lake.storage.errors import InvalidInput\n"
            "try:\n    Template('t', 'Goal.', 'trivial', None, None)\n"
            "except InvalidInput as e:\n    print('refused:', e)\n")
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True).stdout
    assert "refused: template t: difficulty 'trivial'" in out


@pytest.mark.parametrize("task, params, field", [
    ("message_send", {"contact": "Nobody Here", "text": "hi"}, "contact: 'Nobody Here' is not a contact"),
    ("alarm_create", {"time": "25:61"}, "time: '25:61' is not a 24-hour time"),
    ("shop_like", {"item": "Flux Capacitor"}, "item: 'Flux Capacitor' is not a product"),
    ("call_contact", {"name": "Nobody Here"}, "name: 'Nobody Here' is not a contact"),
])
def test_a_parameter_the_phone_does_not_know_names_the_parameter(task, params, field):
    bad = Task(TEMPLATES[task], tuple(params.items()))
    with pytest.raises(InvalidInput, match=re.escape(field)):
        bad.check(Phone(0))
    with pytest.raises(InvalidInput, match=re.escape(field)):
        bad.solution(Phone(0))
