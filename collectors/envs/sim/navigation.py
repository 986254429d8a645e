"""Oracle building blocks: from whatever the phone shows now, the next action toward a goal.

Every helper reads the current screen and state and returns one action (an ``arguments``
dict) or None when its sub-goal already holds, so task solutions are written as "the first
helper that still has something to do" and recover from any detour a noisy policy takes.
Taps aim at a point that really reaches the target (checked with the phone's own hit test),
scrolling the target's list into view first.
"""

from __future__ import annotations

from dataclasses import dataclass

from episodelake.collectors.envs.sim.geometry import to_coordinate
from episodelake.collectors.envs.sim.phone import Phone, hit
from episodelake.collectors.envs.sim.state import APPS, Route
from episodelake.collectors.envs.sim.widgets import Screen, Widget

Action = dict[str, object]

BACK: Action = {"action": "system_button", "button": "back"}
#: The widget handler each kind of tap reaches.
TAP_HANDLERS = {"click": "on_click", "long_press": "on_long_press", "double_tap": "on_double_tap"}


@dataclass(frozen=True)
class Hop:
    """One screen on the way into an app: its screen name, the widget to tap on the previous
    screen to get there, and (optionally) the route argument it must have."""

    screen: str
    via: str = ""
    arg: str | None = None

    def matches(self, route: Route) -> bool:
        return route.screen == self.screen and (self.arg is None or route.arg == self.arg)


def click_at(x: float, y: float, kind: str = "click") -> Action:
    return {"action": kind, "coordinate": to_coordinate(x, y)}


def find(phone: Phone, name: str) -> Widget | None:
    return phone.screen().find(name)


def _aim(screen: Screen, widget: Widget, handler: str) -> tuple[float, float] | None:
    """A point inside the widget's visible part that a touch would deliver to it."""
    box = widget.visible
    if box is None or box.height < min(widget.rect.height, 60) * 0.6:
        return None
    cx, cy = box.center
    candidates = [(cx, cy), (box.left + box.width * 0.25, cy), (box.left + box.width * 0.1, cy),
                  (cx, box.top + box.height * 0.3), (cx, box.bottom - box.height * 0.3)]
    for x, y in candidates:
        found = hit(screen, x, y, (handler,))
        if found.target is widget:
            return x, y
    return None


def tap(phone: Phone, name: str, kind: str = "click") -> Action | None:
    """A tap (or long press / double tap) on widget ``name``, scrolling its list toward it
    when it is out of view; None when no such widget is on this screen."""
    screen = phone.screen()
    widget = screen.find(name)
    if widget is None:
        return None
    point = _aim(screen, widget, TAP_HANDLERS[kind])
    if point is not None:
        return click_at(*point, kind=kind)
    return _scroll_toward(screen, widget)


def _scroll_toward(screen: Screen, widget: Widget) -> Action | None:
    container = screen.scroll_container()
    if container is None or container.scroll is None or not any(w is widget for w in container.walk()):
        return None
    view = container.scroll.viewport
    offset, limit = container.scroll.offset, container.scroll.max_offset
    above = widget.rect.top < view.top + view.height // 3
    if above and offset == 0 or not above and offset >= limit:
        return None  # it cannot come further into view
    return {"action": "swipe", "direction": "down" if above else "up",
            "coordinate": to_coordinate(*view.center)}


def press(phone: Phone, name: str, kind: str = "click") -> Action | None:
    """Like :func:`tap`, but when the widget is missing and the keyboard is up (it shrinks
    the screen and hides the bottom), hide the keyboard first."""
    action = tap(phone, name, kind)
    if action is None and phone.state.focus is not None:
        return BACK
    return action


def set_switch(phone: Phone, names: tuple[str, ...], on: bool) -> Action | None:
    """Flips the first of ``names`` present on screen if it is not already ``on``; None when
    it already is, or when none of them is on this screen (check :func:`find` first)."""
    for name in names:
        widget = find(phone, name)
        if widget is not None:
            return None if widget.checked == on else tap(phone, name)
    return None


def set_slider(phone: Phone, name: str, value: int) -> Action | None:
    """Taps the slider where ``value`` lies; None when it already has that value."""
    screen = phone.screen()
    widget = screen.find(name)
    if widget is None or widget.value == value:
        return None
    if widget.visible is None or widget.visible.height < widget.rect.height:
        return _scroll_toward(screen, widget)
    x = widget.rect.left + 30 + (widget.rect.width - 60) * value / 100
    return click_at(x, widget.rect.center[1])


def fill(phone: Phone, name: str, text: str) -> Action | None:
    """Makes field ``name`` hold exactly ``text``: focus it, clear it if it holds something
    else, type what is missing. None once it holds the text."""
    state = phone.state
    screen = phone.screen()
    route = state.route
    if route is None or name not in screen.fields:
        return None
    current = route.fields.get(name, "")
    if current == text:
        return None
    typing_goes_there = state.focus == name or (state.focus is None and screen.default_field == name)
    if not typing_goes_there:
        return press(phone, name)
    if text.startswith(current):
        return {"action": "type", "text": text[len(current):]}
    return tap(phone, f"{name}_clear") or tap(phone, "backspace") or BACK


def dismiss(phone: Phone) -> Action | None:
    """Closes an open menu or dialog (with its Cancel button when it has one)."""
    state = phone.state
    if state.menu_open:
        return BACK
    if state.dialog is not None:
        return tap(phone, "button2") or BACK
    return None


def open_app(phone: Phone, app: str) -> Action | None:
    """Brings ``app`` to the front: its icon when the home screen shows it, else ``open``."""
    state = phone.state
    if state.foreground == app:
        return None
    if state.foreground is None:
        for prefix in ("icon", "dock", "drawer"):
            action = tap(phone, f"{prefix}_{app}")
            if action is not None:
                return action
    return {"action": "open", "text": APPS[app]}


def navigate(phone: Phone, app: str, path: list[Hop]) -> Action | None:
    """The next action toward the screen reached by ``path`` inside ``app``; None when there.

    Screens past the common prefix of the back stack and the path are left with back; a
    sibling screen (another tab) is switched by tapping the hop's widget when it is shown.
    """
    state = phone.state
    action = dismiss(phone) or open_app(phone, app)
    if action is not None:
        return action
    stack = state.stacks[app]
    k = 0
    while k < min(len(stack), len(path)) and path[k].matches(stack[k]):
        k += 1
    if k == len(stack) == len(path):
        return None
    if k < len(path) and len(stack) in (k, k + 1) and path[k].via:
        action = tap(phone, path[k].via)
        if action is not None:
            return action
    if k < len(stack):
        return BACK
    return press(phone, path[k].via) or BACK


def is_on(phone: Phone, app: str, screen: str, arg: str | None = None) -> bool:
    route = phone.state.route
    return (route is not None and route.app == app and route.screen == screen
            and (arg is None or route.arg == arg) and phone.state.dialog is None and not phone.state.menu_open)

