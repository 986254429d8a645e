"""The launcher: a home screen with app icons and a dock, and the all-apps drawer (swipe up)."""

from __future__ import annotations

from functools import partial

from episodelake.collectors.envs.sim.geometry import CONTENT_TOP, NAV_TOP, STATUS_BAR_H, WIDTH, Rect
from episodelake.collectors.envs.sim.state import APPS, PhoneState
from episodelake.collectors.envs.sim.widgets import TEXT_SMALL, UI, Widget

PACKAGE = "com.google.android.apps.nexuslauncher"

APP_COLORS: dict[str, tuple[int, int, int]] = {
    "settings": (96, 125, 139),
    "clock": (63, 81, 181),
    "notes": (245, 180, 0),
    "contacts": (66, 133, 244),
    "phone": (52, 168, 83),
    "messages": (26, 115, 232),
    "shop": (234, 67, 53),
}

HOME_GRID = ("settings", "clock", "notes", "contacts")
DOCK = ("phone", "messages", "shop")
ICON = 168


def build(ui: UI) -> None:
    if ui.state.drawer:
        _drawer(ui)
    else:
        _home(ui)


def _open(app: str, state: PhoneState) -> None:
    state.open_app(app)


def _set_drawer(open_: bool, state: PhoneState) -> None:
    state.drawer = open_


def _icon(ui: UI, app: str, column: int, top: int, prefix: str, columns: int = 4) -> None:
    cell = WIDTH // columns
    cx = column * cell + cell // 2
    widget = ui.add(Widget("app_icon", Rect(cx - 130, top, cx + 130, top + ICON + 90), rid=ui.rid(f"{prefix}_{app}"),
                           text=APPS[app], desc=APPS[app], glyph=app, color=APP_COLORS[app], size=TEXT_SMALL,
                           on_click=partial(_open, app)))
    widget.children.append(Widget("image", Rect(cx - ICON // 2, top, cx + ICON // 2, top + ICON), glyph=app,
                                  color=APP_COLORS[app], role="app_tile"))
    widget.role = prefix


def _home(ui: UI) -> None:
    ui.screen.title = "Home screen"
    ui.add(Widget("frame", Rect(0, STATUS_BAR_H, WIDTH, NAV_TOP), role="wallpaper"))
    ui.add(Widget("button", Rect(60, CONTENT_TOP + 40, WIDTH - 60, CONTENT_TOP + 190), rid=ui.rid("search_box"),
                  text="Search apps", role="search_pill", on_click=partial(_set_drawer, True)))
    for column, app in enumerate(HOME_GRID):
        _icon(ui, app, column, 900, "icon")
    ui.add(Widget("frame", Rect(40, NAV_TOP - 360, WIDTH - 40, NAV_TOP - 40), role="dock"))
    for column, app in enumerate(DOCK):
        _icon(ui, app, column, NAV_TOP - 320, "dock", columns=3)
    ui.screen.swipes["up"] = partial(_set_drawer, True)


def _drawer(ui: UI) -> None:
    ui.screen.title = "All apps"
    ui.add(Widget("frame", Rect(0, STATUS_BAR_H, WIDTH, NAV_TOP), role="drawer"))
    ui.text(Rect(60, CONTENT_TOP - 80, WIDTH - 60, CONTENT_TOP + 20), "All apps", size=TEXT_SMALL * 3 // 2)
    for i, app in enumerate(sorted(APPS, key=lambda a: APPS[a])):
        row, column = divmod(i, 4)
        _icon(ui, app, column, CONTENT_TOP + 120 + row * 340, "drawer")
    ui.screen.swipes["down"] = partial(_set_drawer, False)
