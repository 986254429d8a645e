"""Clock: the alarm list, the alarm editor, and its "type in time" dialog.

The editor keeps its draft (hour, minute, label) in the route, so leaving with home and
coming back resumes it; spinner arrows step hours by 1 and minutes by 5, the time dialog
accepts any ``H:MM``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from episodelake.collectors.envs.sim.apps.kit import close_dialog, confirm_delete
from episodelake.collectors.envs.sim.geometry import CONTENT_TOP, WIDTH, Rect
from episodelake.collectors.envs.sim.overlays import dialog_box
from episodelake.collectors.envs.sim.state import Alarm, Dialog, PhoneState
from episodelake.collectors.envs.sim.widgets import TEXT_SMALL, UI, Widget

PACKAGE = "com.google.android.deskclock"

TIME_PATTERN = re.compile(r"^\s*(\d{1,2})\s*:\s*(\d{2})\s*$")


def dialog(ui: UI, box: Dialog) -> None:
    if box.kind == "time":
        dialog_box(ui, "Type in time", "Enter the time as hh:mm", field_name="time_input",
                   placeholder="hh:mm",
                   buttons=(("button1", "OK", _apply_typed_time), ("button2", "Cancel", close_dialog)))
    elif box.kind == "delete_alarm":
        alarm = ui.state.alarm(box.arg)
        assert alarm is not None
        confirm_delete(ui, "Delete alarm?", f"The {alarm.time} alarm will be removed.", partial(_delete, alarm.id))


# --- handlers ------------------------------------------------------------------------------

def parse_time(text: str) -> tuple[int, int] | None:
    """``"7:05"`` -> (7, 5); None when the text is not a valid 24-hour time."""
    match = TIME_PATTERN.match(text)
    if not match:
        return None
    hour, minute = int(match.group(1)), int(match.group(2))
    return (hour, minute) if hour < 24 and minute < 60 else None


def _new_alarm(state: PhoneState) -> None:
    state.push("clock", "edit", "new", hour="8", minute="0", label="")


def _edit_alarm(alarm_id: str, state: PhoneState) -> None:
    alarm = state.alarm(alarm_id)
    assert alarm is not None
    state.push("clock", "edit", alarm_id, hour=str(alarm.hour), minute=str(alarm.minute),
               label=alarm.label)


def _ask_delete(alarm_id: str, state: PhoneState) -> None:
    state.dialog = Dialog("delete_alarm", alarm_id)


def _delete(alarm_id: str, state: PhoneState) -> None:
    state.alarms = [a for a in state.alarms if a.id != alarm_id]
    state.close_deleted("edit")


def _flip_alarm(alarm_id: str, state: PhoneState) -> None:
    alarm = state.alarm(alarm_id)
    assert alarm is not None
    alarm.enabled = not alarm.enabled


def _step(field: str, delta: int, modulo: int, state: PhoneState) -> None:
    route = state.route
    assert route is not None
    route.fields[field] = str((int(route.fields[field]) + delta) % modulo)


def _open_time_dialog(state: PhoneState) -> None:
    assert state.route is not None
    state.route.fields["time_input"] = ""
    state.dialog = Dialog("time")
    state.focus = "time_input"


def _apply_typed_time(state: PhoneState) -> None:
    route = state.route
    assert route is not None
    parsed = parse_time(route.fields.get("time_input", ""))
    if parsed is None:
        state.toast = "Enter a valid time"
        return
    route.fields["hour"], route.fields["minute"] = str(parsed[0]), str(parsed[1])
    close_dialog(state)


def _save(state: PhoneState) -> None:
    route = state.route
    assert route is not None
    hour, minute = int(route.fields["hour"]), int(route.fields["minute"])
    label = route.fields.get("label", "").strip() or "Alarm"
    if route.arg == "new":
        state.alarms.append(Alarm(state.new_id("a"), hour, minute, label, True))
    else:
        alarm = state.alarm(route.arg)
        assert alarm is not None
        alarm.hour, alarm.minute, alarm.label, alarm.enabled = hour, minute, label, True
    state.toast = f"Alarm set for {hour:02d}:{minute:02d}"
    state.back()


# --- screens -------------------------------------------------------------------------------

def _alarms(ui: UI) -> None:
    ui.app_bar("Alarms")
    lst = ui.list_view("alarm_list")
    for alarm in sorted(ui.state.alarms, key=lambda a: (a.hour, a.minute, a.id)):
        switch = ui.switch(Rect(0, 0, 150, 84), f"alarm_switch_{alarm.id}", alarm.enabled,
                           partial(_flip_alarm, alarm.id))
        card = Widget("card", Rect(32, 16, WIDTH - 32, 284), rid=ui.rid(f"alarm_{alarm.id}"),
                      desc=f"Alarm {alarm.time}", on_click=partial(_edit_alarm, alarm.id),
                      on_long_press=partial(_ask_delete, alarm.id))
        card.children.append(Widget("text", Rect(80, 40, 700, 180), text=alarm.time, size=120,
                                    role="" if alarm.enabled else "muted"))
        card.children.append(Widget("text", Rect(84, 190, 700, 250), text=alarm.label, size=TEXT_SMALL,
                                    role="muted"))
        switch.rect = Rect(WIDTH - 240, 108, WIDTH - 90, 192)
        switch.visible = switch.rect
        card.children.append(switch)
        lst.add(card, 300)
    lst.done()
    ui.fab("add_alarm", "Add alarm", _new_alarm)


def _editor(ui: UI) -> None:
    route = ui.route
    assert route is not None
    new = route.arg == "new"
    ui.app_bar("Add alarm" if new else "Edit alarm", back=PhoneState.back)
    hour, minute = int(route.fields["hour"]), int(route.fields["minute"])
    ui.label("time", f"{hour:02d}:{minute:02d}")
    top = CONTENT_TOP + 60
    for name, delta, modulo, left in (("hour", 1, 24, 180), ("minute", 5, 60, 600)):
        ui.icon_button(Rect(left + 60, top, left + 240, top + 140), "up", f"{name}_up", f"Increase {name}",
                       partial(_step, name, delta, modulo))
        ui.icon_button(Rect(left + 60, top + 520, left + 240, top + 660), "down", f"{name}_down",
                       f"Decrease {name}", partial(_step, name, -delta, modulo))
    time = ui.add(Widget("button", Rect(140, top + 150, WIDTH - 140, top + 500), rid=ui.rid("time_display"),
                         text=f"{hour:02d}:{minute:02d}", size=200, align="center", role="time",
                         desc="Type in time", on_click=_open_time_dialog))
    time.children.append(Widget("text", Rect(140, top + 430, WIDTH - 140, top + 480), text="Tap to type",
                                size=TEXT_SMALL, role="muted", align="center"))
    y = top + 720
    ui.text(Rect(80, y, WIDTH - 80, y + 60), "Label", size=TEXT_SMALL, role="accent")
    ui.field(Rect(80, y + 70, WIDTH - 80, y + 220), "label", "Alarm label", max_length=30)
    y += 300
    if y + 160 <= ui.bottom:
        if not new:
            ui.button(Rect(80, y, 380, y + 150), "Delete", "delete_alarm", partial(_ask_delete, route.arg),
                      role="outlined")
        ui.button(Rect(WIDTH - 680, y, WIDTH - 400, y + 150), "Cancel", "cancel", PhoneState.back, role="text")
        ui.button(Rect(WIDTH - 360, y, WIDTH - 80, y + 150), "Save", "save", _save)


#: The app's screens by route name, each laying its screen out.
SCREENS: dict[str, Callable[[UI], None]] = {"main": _alarms, "edit": _editor}
