"""Clock tasks: set, switch and delete alarms."""

from __future__ import annotations

from episodelake.collectors.envs.sim import navigation as nav
from episodelake.collectors.envs.sim.apps.clock import parse_time
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.state import PhoneState
from episodelake.collectors.envs.sim.tasks.base import (
    Params,
    Template,
    alarm_at,
    delete_from_list,
    grid,
    initial,
)

ALARM_TIMES = ["05:45", "06:00", "06:15", "07:15", "07:30", "07:45", "08:30", "10:00", "12:30", "13:15",
               "18:00", "21:45", "22:30", "23:00"]


def _alarm_create_check(state: PhoneState, params: Params) -> bool:
    alarm = alarm_at(state, params)
    return alarm is not None and alarm.enabled


def _alarm_create_solve(phone: Phone, params: Params) -> nav.Action | None:
    state = phone.state
    route = state.route
    wanted = parse_time(params["time"])
    if route is not None and route.app == "clock" and route.screen == "edit" and route.arg == "new":
        if state.dialog is not None and state.dialog.kind == "time":
            return nav.fill(phone, "time_input", params["time"]) or nav.press(phone, "button1")
        if state.dialog is not None or state.menu_open:
            return nav.dismiss(phone)
        if (int(route.fields["hour"]), int(route.fields["minute"])) == wanted:
            return nav.press(phone, "save")
        return nav.press(phone, "time_display")
    return nav.navigate(phone, "clock", [nav.Hop("main"), nav.Hop("edit", "add_alarm", arg="new")])


def _alarm_switch_check(state: PhoneState, params: Params) -> bool:
    alarm = alarm_at(state, params)
    return alarm is not None and alarm.enabled == (params["state"] == "on")


def _alarm_switch_solve(phone: Phone, params: Params) -> nav.Action | None:
    alarm = alarm_at(phone.state, params)
    if alarm is None:
        return None
    if nav.is_on(phone, "clock", "main"):
        return nav.set_switch(phone, (f"alarm_switch_{alarm.id}",), params["state"] == "on")
    return nav.navigate(phone, "clock", [nav.Hop("main")])


def _alarm_delete_check(state: PhoneState, params: Params) -> bool:
    others = {a.time for a in initial().alarms} - {params["time"]}
    return alarm_at(state, params) is None and others <= {a.time for a in state.alarms}


def _alarm_delete_solve(phone: Phone, params: Params) -> nav.Action | None:
    alarm = alarm_at(phone.state, params)
    if alarm is None:
        return None
    return delete_from_list(phone, "clock", "delete_alarm", alarm.id, f"alarm_{alarm.id}")


TEMPLATES = [
    Template("alarm_create", "Set an alarm for {time}.", "medium", _alarm_create_check, _alarm_create_solve,
             grid(time=ALARM_TIMES)),
    Template("alarm_switch", "Turn {state} the {time} alarm.", "medium", _alarm_switch_check,
             _alarm_switch_solve, ({"time": "06:30", "state": "off"}, {"time": "07:00", "state": "off"},
                                   {"time": "09:30", "state": "on"})),
    Template("alarm_delete", "Delete the {time} alarm.", "medium", _alarm_delete_check, _alarm_delete_solve,
             grid(time=["06:30", "07:00", "09:30"])),
]
