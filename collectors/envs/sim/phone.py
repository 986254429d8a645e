"""The simulated phone: takes actions, gives screenshots, trees and ground-truth screen ids.

Typical loop (what a rollout runner does)::

    phone = Phone(seed)
    task.setup(phone)
    while not phone.done:
        png = phone.screenshot()
        outcome = phone.step(arguments)   # the parsed tool-call arguments

Each step takes ``STEP_SECONDS`` of simulated time (``wait`` longer), so the status-bar clock
moves and exact screenshot hashes differ between steps and episodes, as on a device.
Everything else is a pure function of the seed and the actions: same seed and same actions
give byte-identical PNGs.

Gestures, in the agents' terms: ``swipe up`` moves the finger up, so the content scrolls
down and reveals what is below; ``drag`` moves a slider's knob to the end point or drags a
list's content along with the finger; a double tap on something with no double-tap meaning
counts as one tap.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Mapping
from dataclasses import dataclass

from PIL import Image

from episodelake.collectors.envs.sim import a11y, render
from episodelake.collectors.envs.sim.actions import Action, InvalidAction, validate
from episodelake.collectors.envs.sim.apps import APP_MODULES, launcher
from episodelake.collectors.envs.sim.geometry import STATUS_BAR_H
from episodelake.collectors.envs.sim.overlays import apply_overlays, submit, system_back, type_text
from episodelake.collectors.envs.sim.state import (
    APPS,
    STEP_SECONDS,
    WAIT_SECONDS,
    PhoneState,
    initial_state,
)
from episodelake.collectors.envs.sim.widgets import UI, Screen, Widget

log = logging.getLogger(__name__)

#: Share of a list's height that one swipe scrolls.
SWIPE_FRACTION = 0.75

#: Top-level layers that swallow touches that reach no widget (nothing under them is hit).
OPAQUE_KINDS = ("dialog", "list")
OPAQUE_ROLES = ("keyboard", "app_bar", "nav_bar", "status_bar", "tab_bar", "compose_bar")

#: Other names agents use for the apps, for the ``open`` action.
APP_ALIASES = {"dialer": "phone", "calls": "phone", "sms": "messages", "keep": "notes", "alarm": "clock",
               "alarms": "clock", "store": "shop", "shopping": "shop", "people": "contacts"}


@dataclass(frozen=True)
class StepOutcome:
    """What one step did. An invalid action is a no-op whose ``reason`` says why; ``done`` is
    set once the agent has terminated; ``result`` describes the effect in words."""

    valid: bool
    reason: str | None = None
    done: bool = False
    result: str = ""


def _copy_state(state: PhoneState) -> PhoneState:
    """A deep copy. The state is plain dataclasses, lists and dicts, which a pickle round
    trip copies about 4x faster than `copy.deepcopy`; the step judge copies several states
    per step, so this was a third of a rollout's time."""
    return pickle.loads(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))


class Phone:
    """One simulated device. ``state`` may be changed directly (task set-up does); call
    :meth:`invalidate` afterwards so the next screenshot shows the change."""

    def __init__(self, seed: int = 0, *, state: PhoneState | None = None):
        self.seed = seed
        self.state = initial_state(seed) if state is None else state
        self._screen: Screen | None = None
        self._image: Image.Image | None = None
        self._png: bytes | None = None

    @classmethod
    def from_snapshot(cls, snapshot: PhoneState, seed: int = 0) -> Phone:
        return cls(seed, state=_copy_state(snapshot))

    def snapshot(self) -> PhoneState:
        """A deep copy of the whole state (for the step judge, or to branch a rollout)."""
        return _copy_state(self.state)

    def clone(self) -> Phone:
        return Phone.from_snapshot(self.state, self.seed)

    def invalidate(self) -> None:
        self._screen = None
        self._image = None
        self._png = None

    @property
    def done(self) -> bool:
        return self.state.terminated is not None

    # --- observation ---------------------------------------------------------------------

    def screen(self) -> Screen:
        """The current layout (widgets with handlers); what every observation derives from."""
        if self._screen is None:
            self._screen = self._build()
        return self._screen

    def screen_id(self) -> str:
        """Ground truth for "same screen": the logical screen and everything its pixels below
        the status bar depend on, e.g. ``settings/network[title=...,wifi_switch=on,...]``.
        For tests and benchmarks only; agents never see it."""
        screen = self.screen()
        return f"{screen.key}[{screen.label}]"

    def image(self) -> Image.Image:
        if self._image is None:
            self._image = render.render(self.screen())
        return self._image

    def screenshot(self) -> bytes:
        """The screen as PNG bytes (540x1200, reproducible encoder settings)."""
        if self._png is None:
            self._png = render.encode_png(self.image())
        return self._png

    def ui_tree(self) -> str:
        """The accessibility tree as uiautomator-style XML."""
        return a11y.dump(self.screen())

    # --- actions -------------------------------------------------------------------------

    def step(self, arguments: Mapping[str, object]) -> StepOutcome:
        """Executes one action given as the tool call's ``arguments`` dict."""
        if self.done:
            return StepOutcome(False, "the episode has already terminated", True)
        screen = self.screen()  # what the agent saw when it chose the action
        state = self.state
        state.clock_s += STEP_SECONDS
        state.toast = None
        try:
            action = validate(arguments)
            result = self._execute(action, screen)
        except InvalidAction as error:
            log.debug("invalid action %r: %s", arguments, error)
            self.invalidate()
            return StepOutcome(False, str(error), False, "")
        self.invalidate()
        return StepOutcome(True, None, self.done, result)

    def _execute(self, action: Action, screen: Screen) -> str:
        state = self.state
        match action.type:
            case "click" | "long_press" | "double_tap":
                return self._tap(action, screen)
            case "swipe":
                return self._swipe(action, screen)
            case "drag":
                return self._drag(action, screen)
            case "type":
                return self._type(action.text or "", screen)
            case "open":
                app = resolve_app(action.text or "")
                state.open_app(app)
                return f"opened {APPS[app]}"
            case "system_button":
                return self._button(action.button or "", screen)
            case "wait":
                state.clock_s += WAIT_SECONDS
                return "waited"
            case "terminate":
                state.terminated = action.status
                return f"terminated ({action.status})"
            case "answer":
                state.answer = action.text
                return f"answered: {action.text}"
        raise AssertionError(action.type)

    def _tap(self, action: Action, screen: Screen) -> str:
        assert action.point is not None
        x, y = action.point
        verb = {"click": "tapped", "long_press": "long-pressed", "double_tap": "double-tapped"}[action.type]
        handlers = {"click": ("on_click", "on_set_value"), "long_press": ("on_long_press",),
                    "double_tap": ("on_double_tap", "on_click", "on_set_value")}[action.type]
        touched = self._touch(screen, x, y, handlers)
        if isinstance(touched, str):
            return f"{verb} {touched}"
        if touched is None:
            return f"{verb} at ({x:.0f}, {y:.0f}): nothing there responds"
        target, handler = touched
        if handler == "on_set_value":
            assert target.on_set_value is not None
            value = slider_value(target, x)
            target.on_set_value(self.state, value)
            return f"set {target.label} to {value}"
        getattr(target, handler)(self.state)
        return f"{verb} {describe(target)}"

    def _touch(self, screen: Screen, x: float, y: float,
               handlers: tuple[str, ...]) -> tuple[Widget, str] | str | None:
        """Applies :func:`hit`: closes the menu or dialog a touch lands outside of (returning
        what happened), else returns the widget reached and its handler name, or None."""
        found = hit(screen, x, y, handlers)
        if found.closes == "menu":
            self.state.menu_open = False
            return "outside the menu, which closed"
        if found.closes == "dialog":
            self.state.dialog = None
            self.state.focus = None
            return "outside the dialog, which closed"
        if found.target is None or found.handler is None:
            return None
        return found.target, found.handler

    def _swipe(self, action: Action, screen: Screen) -> str:
        direction = action.direction or ""
        container = screen.scroll_container()
        start = action.point
        if start is not None and start[1] < STATUS_BAR_H:
            return "swiped from the status bar: nothing happens here"
        if container is not None and direction in ("up", "down") and (
                start is None or container.rect.contains(*start)):
            assert container.scroll is not None
            step = round(container.scroll.viewport.height * SWIPE_FRACTION)
            return self._scroll(container, step if direction == "up" else -step)
        handler = screen.swipes.get(direction)
        if handler is not None:
            handler(self.state)
            return f"swiped {direction}"
        return f"swiped {direction}: nothing to scroll there"

    def _scroll(self, container: Widget, delta: int) -> str:
        route = self.state.route
        assert container.scroll is not None and route is not None
        before = container.scroll.offset
        after = min(max(before + delta, 0), container.scroll.max_offset)
        route.scroll = after
        if after == before:
            return "the list is already at its " + ("end" if delta > 0 else "top")
        return f"scrolled the list {'down' if delta > 0 else 'up'}"

    def _drag(self, action: Action, screen: Screen) -> str:
        assert action.point is not None and action.end is not None
        (x0, y0), (x1, y1) = action.point, action.end
        touched = self._touch(screen, x0, y0, ("on_set_value",))
        if isinstance(touched, str):
            return f"dragged from {touched}"
        if touched is not None:
            slider = touched[0]
            assert slider.on_set_value is not None
            value = slider_value(slider, x1)
            slider.on_set_value(self.state, value)
            return f"set {slider.label} to {value}"
        container = screen.scroll_container()
        if container is not None and container.rect.contains(x0, y0):
            return self._scroll(container, round(y0 - y1))
        return "dragged: nothing there moves"

    def _type(self, text: str, screen: Screen) -> str:
        name = self.state.focus or screen.default_field
        spec = screen.fields.get(name or "")
        if spec is None:
            return "no text field is focused; nothing was typed"
        typed = type_text(self.state, spec, text)
        return f'typed "{typed}"'

    def _button(self, button: str, screen: Screen) -> str:
        state = self.state
        if button == "back":
            system_back(state, screen)
            return "pressed back"
        if button == "home":
            state.go_home()
            return "went to the home screen"
        if button == "menu":
            if not screen.menu:
                return "this screen has no menu"
            state.menu_open = not state.menu_open
            return "opened the menu" if state.menu_open else "closed the menu"
        spec = screen.fields.get(state.focus or "")
        if spec is None:
            return "pressed enter: no field is focused"
        submit(state, spec)
        return "pressed enter"

    # --- layout --------------------------------------------------------------------------

    def _build(self) -> Screen:
        state = self.state
        route = state.route
        if route is None:
            ui = UI(state, None, launcher.PACKAGE, "home/drawer" if state.drawer else "home")
            launcher.build(ui)
        else:
            module = APP_MODULES[route.app]
            ui = UI(state, route, module.PACKAGE, f"{route.app}/{route.screen}")
            module.SCREENS[route.screen](ui)
            if state.dialog is not None:
                module.dialog(ui, state.dialog)
        return apply_overlays(ui, state)


def resolve_app(name: str) -> str:
    """The app id for a name an agent gives to ``open`` (case-insensitive, a few aliases)."""
    wanted = name.strip().lower()
    for app, label in APPS.items():
        if wanted in (app, label.lower()):
            return app
    if wanted in APP_ALIASES:
        return APP_ALIASES[wanted]
    raise InvalidAction(f"no app named {name!r}; installed apps: {', '.join(APPS.values())}")


@dataclass(frozen=True)
class Hit:
    """Where a touch lands: a widget and which handler of it fires, or the overlay it closes
    ("menu" or "dialog") by landing outside it, or nothing."""

    target: Widget | None = None
    handler: str | None = None
    closes: str | None = None


def hit(screen: Screen, x: float, y: float, handlers: tuple[str, ...]) -> Hit:
    """Resolves a touch top layer first, without changing anything (the oracle uses it to
    check that a target is not covered). Toasts never take touches; a touch outside an open
    menu or dialog closes it and goes no further; opaque layers (lists, bars, the keyboard)
    swallow touches that reach none of their widgets."""
    for layer in reversed(screen.widgets):
        if layer.kind == "toast":
            continue
        inside = layer.visible is not None and layer.visible.contains(x, y)
        if layer.kind == "dialog" and layer.role == "menu" and not inside:
            return Hit(closes="menu")
        if layer.kind == "scrim":
            return Hit(closes="dialog")
        if not inside:
            continue
        for handler in handlers:
            target = find_target(layer, x, y, handler)
            if target is not None:
                return Hit(target, handler)
        if layer.kind in OPAQUE_KINDS or layer.role in OPAQUE_ROLES:
            return Hit()
    return Hit()


def find_target(widget: Widget, x: float, y: float, handler: str) -> Widget | None:
    """The innermost visible widget at (x, y) that has ``handler`` set."""
    if widget.visible is None or not widget.visible.contains(x, y):
        return None
    for child in reversed(widget.children):
        found = find_target(child, x, y, handler)
        if found is not None:
            return found
    return widget if getattr(widget, handler) is not None else None


def slider_value(slider: Widget, x: float) -> int:
    """The slider value under x, snapped to the slider's step (the track has 30 px ends)."""
    left, width = slider.rect.left + 30, slider.rect.width - 60
    raw = min(max((x - left) / width, 0.0), 1.0) * 100
    step = slider.value_step
    return int(round(raw / step) * step)


def describe(widget: Widget) -> str:
    """A short human description of a widget, for step results and the demo's thinking."""
    label = widget.text or widget.desc
    if not label:
        label = next((w.text for w in widget.walk() if w.text), "") or widget.rid.rsplit("/", 1)[-1]
    kind = {"switch": "switch", "field": "field", "key": "key", "slider": "slider", "tab": "tab"}.get(widget.kind)
    return f'"{label}"' + (f" {kind}" if kind else "")

