"""Widgets and screens: the one layout that rendering, hit testing and the tree all read.

An app describes a screen by calling the builder (:class:`UI`) with the phone's state; the
result is a :class:`Screen`, a list of :class:`Widget` in logical pixels with their event
handlers attached. The renderer draws it, the accessibility dump walks it, the phone sends
taps to it, and the oracle searches it. Because all four read the same object, what an agent
sees, what the tree says and what a tap does cannot drift apart.

Every helper that shows state (a switch, a slider, a field, a list) also adds a part to the
screen's state label, from which :meth:`Phone.screen_id` is made; the label must name
exactly what the pixels below the status bar depend on, since benchmarks use it as ground
truth for "same screen".
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from episodelake.collectors.envs.sim.geometry import (
    APP_BAR_H,
    CONTENT_TOP,
    KEYBOARD_TOP,
    NAV_TOP,
    STATUS_BAR_H,
    WIDTH,
    Rect,
)
from episodelake.collectors.envs.sim.state import PhoneState, Route

Handler = Callable[[PhoneState], None]
ValueHandler = Callable[[PhoneState, int], None]

#: Widget kinds and the Android class the accessibility dump reports for each.
ANDROID_CLASSES: dict[str, str] = {
    "frame": "android.widget.FrameLayout",
    "text": "android.widget.TextView",
    "button": "android.widget.Button",
    "icon_button": "android.widget.ImageButton",
    "fab": "android.widget.ImageButton",
    "app_icon": "android.widget.TextView",
    "row": "android.widget.LinearLayout",
    "card": "android.widget.FrameLayout",
    "avatar": "android.widget.ImageView",
    "image": "android.widget.ImageView",
    "switch": "android.widget.Switch",
    "slider": "android.widget.SeekBar",
    "field": "android.widget.EditText",
    "list": "androidx.recyclerview.widget.RecyclerView",
    "key": "android.widget.Button",
    "tab": "android.widget.TextView",
    "bubble": "android.widget.TextView",
    "dialog": "android.widget.FrameLayout",
    "toast": "android.widget.Toast",
    "scrim": "android.view.View",
}

#: Default pixel sizes of text roles (logical px).
TEXT_TITLE = 64
TEXT_BODY = 46
TEXT_SMALL = 38


@dataclass(eq=False)
class Scroll:
    """A scrolling container's position: ``offset`` px of content are above the viewport."""

    offset: int
    content_height: int
    viewport: Rect

    @property
    def max_offset(self) -> int:
        return max(0, self.content_height - self.viewport.height)


@dataclass(eq=False, slots=True)
class Widget:
    """One visible element. ``rect`` is where it is drawn, ``visible`` the part of it that
    is on screen (None when scrolled out of its list); ``role`` picks a colour variant and
    ``glyph`` an icon for the renderer."""

    kind: str
    rect: Rect
    rid: str = ""
    text: str = ""
    desc: str = ""
    checked: bool | None = None
    value: int | None = None
    focused: bool = False
    role: str = ""
    glyph: str = ""
    size: int = TEXT_BODY
    align: str = "left"
    color: tuple[int, int, int] | None = None
    children: list[Widget] = field(default_factory=list)
    on_click: Handler | None = None
    on_long_press: Handler | None = None
    on_double_tap: Handler | None = None
    on_set_value: ValueHandler | None = None
    value_step: int = 1
    scroll: Scroll | None = None
    visible: Rect | None = None

    def __post_init__(self) -> None:
        if self.visible is None:
            self.visible = self.rect

    @property
    def clickable(self) -> bool:
        return self.on_click is not None or self.on_set_value is not None

    @property
    def label(self) -> str:
        """What a person would call this widget: its text, else its description."""
        return self.text or self.desc or self.rid.rsplit("/", 1)[-1]

    def walk(self) -> Iterator[Widget]:
        yield self
        for child in self.children:
            yield from child.walk()

    def shift(self, dy: int) -> None:
        self.rect = self.rect.shifted(dy)
        self.visible = self.rect
        for child in self.children:
            child.shift(dy)

    def clip(self, viewport: Rect) -> None:
        self.visible = self.rect.intersect(viewport)
        for child in self.children:
            child.clip(viewport)


@dataclass
class FieldSpec:
    """How typing into a text field behaves: where its text lives and what Enter does."""

    name: str
    multiline: bool = False
    max_length: int = 200
    on_submit: Handler | None = None


@dataclass(eq=False)
class Screen:
    """A laid-out screen: widgets in drawing order plus what the phone needs to drive it."""

    key: str
    package: str
    title: str
    widgets: list[Widget] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    fields: dict[str, FieldSpec] = field(default_factory=dict)
    #: Field that receives typed text when nothing is focused (the dialer's number).
    default_field: str | None = None
    menu: list[tuple[str, str, Handler]] = field(default_factory=list)  # (rid name, text, handler)
    swipes: dict[str, Handler] = field(default_factory=dict)  # direction -> handler
    #: What back does on this screen when no overlay is open (default: leave the screen).
    on_back: Handler | None = None
    dark: bool = False

    @property
    def label(self) -> str:
        return ",".join(self.labels)

    def walk(self) -> Iterator[Widget]:
        for widget in self.widgets:
            yield from widget.walk()

    def find(self, name: str) -> Widget | None:
        """The widget whose resource id ends in ``:id/<name>`` (first in drawing order)."""
        suffix = f":id/{name}"
        return next((w for w in self.walk() if w.rid.endswith(suffix)), None)

    def scroll_container(self) -> Widget | None:
        return next((w for w in self.walk() if w.scroll is not None), None)


def digest(parts: list[str]) -> str:
    """A short stable digest of displayed texts, for state labels."""
    return hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:8]


class UI:
    """Builds one screen of one app. Apps call its helpers top to bottom; ``bottom`` is where
    content must end (above the keyboard when a field is focused, as with adjustResize)."""

    def __init__(self, state: PhoneState, route: Route | None, package: str, key: str):
        self.state = state
        self.route = route
        self.package = package
        self.screen = Screen(key=key, package=package, title="", dark=state.settings.dark)
        self.bottom = KEYBOARD_TOP if state.focus else NAV_TOP

    def rid(self, name: str) -> str:
        return f"{self.package}:id/{name}" if name else ""

    def label(self, key: str, value: object) -> None:
        self.screen.labels.append(f"{key}={value}")

    def add(self, widget: Widget) -> Widget:
        self.screen.widgets.append(widget)
        return widget

    # --- bars --------------------------------------------------------------------------

    def app_bar(self, title: str, back: Handler | None = None, actions: tuple[Widget, ...] = ()) -> Widget:
        """The top bar: optional back arrow, a title, action icons on the right. Its title is
        also the screen's title."""
        self.screen.title = title
        if title:
            self.label("bar", title)
        bar = Widget("frame", Rect(0, STATUS_BAR_H, WIDTH, STATUS_BAR_H + APP_BAR_H),
                     rid=self.rid("app_bar"), role="app_bar")
        left = 40
        if back is not None:
            bar.children.append(Widget("icon_button", Rect(24, STATUS_BAR_H + 24, 144, STATUS_BAR_H + 144),
                                       rid=self.rid("navigate_up"), desc="Navigate up", glyph="back",
                                       on_click=back))
            left = 170
        bar.children.append(Widget("text", Rect(left, STATUS_BAR_H + 40, WIDTH - 60 - 130 * len(actions),
                                                STATUS_BAR_H + 128),
                                   rid=self.rid("toolbar_title"), text=title, size=TEXT_TITLE))
        right = WIDTH - 24
        for action in reversed(actions):
            action.rect = Rect(right - 120, STATUS_BAR_H + 24, right, STATUS_BAR_H + 144)
            action.visible = action.rect
            bar.children.append(action)
            right -= 130
        return self.add(bar)

    def action(self, name: str, glyph: str, desc: str, handler: Handler | None,
               checked: bool | None = None) -> Widget:
        """An app-bar action icon (laid out by :meth:`app_bar`)."""
        if checked is not None:
            self.label(name, "on" if checked else "off")
        return Widget("icon_button", Rect(0, 0, 0, 0), rid=self.rid(name), desc=desc, glyph=glyph,
                      checked=checked, on_click=handler)

    def tabs(self, items: list[tuple[str, str, bool, Handler]]) -> None:
        """A bottom tab bar: (rid name, text, selected, handler) per tab."""
        top = self.bottom - 150
        self.add(Widget("frame", Rect(0, top, WIDTH, self.bottom), role="tab_bar"))
        width = WIDTH // len(items)
        for i, (name, text, selected, handler) in enumerate(items):
            self.add(Widget("tab", Rect(i * width, top, (i + 1) * width, self.bottom), rid=self.rid(name),
                            text=text, checked=selected, role="tab", align="center",
                            size=TEXT_SMALL, on_click=handler))
            if selected:
                self.label("tab", name)
        self.bottom = top

    # --- basic widgets -----------------------------------------------------------------

    def text(self, rect: Rect, text: str, *, name: str = "", size: int = TEXT_BODY, role: str = "",
             align: str = "left") -> Widget:
        return self.add(Widget("text", rect, rid=self.rid(name), text=text, size=size, role=role,
                               align=align))

    def button(self, rect: Rect, text: str, name: str, handler: Handler | None, *,
               role: str = "filled", enabled: bool = True) -> Widget:
        return self.add(Widget("button", rect, rid=self.rid(name), text=text, role=role if enabled else "disabled",
                               align="center", on_click=handler if enabled else None))

    def icon_button(self, rect: Rect, glyph: str, name: str, desc: str, handler: Handler | None,
                    *, role: str = "") -> Widget:
        return self.add(Widget("icon_button", rect, rid=self.rid(name), desc=desc, glyph=glyph,
                               role=role, on_click=handler))

    def fab(self, name: str, desc: str, handler: Handler, glyph: str = "plus") -> Widget:
        """The floating action button in the bottom-right corner of the content."""
        rect = Rect(WIDTH - 232, self.bottom - 232, WIDTH - 64, self.bottom - 64)
        return self.add(Widget("fab", rect, rid=self.rid(name), desc=desc, glyph=glyph, on_click=handler))

    def switch(self, rect: Rect, name: str, checked: bool, handler: Handler) -> Widget:
        self.label(name, "on" if checked else "off")
        return Widget("switch", rect, rid=self.rid(name), checked=checked, on_click=handler)

    def field(self, rect: Rect, name: str, placeholder: str, *, multiline: bool = False,
              on_submit: Handler | None = None, max_length: int = 200, clearable: bool = True,
              keyboard: bool = True) -> Widget:
        """Adds a text field to the screen (see :meth:`make_field`)."""
        return self.add(self.make_field(rect, name, placeholder, multiline=multiline, on_submit=on_submit,
                                        max_length=max_length, clearable=clearable, keyboard=keyboard))

    def make_field(self, rect: Rect, name: str, placeholder: str, *, multiline: bool = False,
                   on_submit: Handler | None = None, max_length: int = 200, clearable: bool = True,
                   keyboard: bool = True) -> Widget:
        """A text field backed by ``route.fields[name]``, for a container to place; a tap
        focuses it (and shows the keyboard unless ``keyboard`` is False, as for the dialer's
        number), a clear button appears once it holds text."""
        assert self.route is not None, "text fields live on app screens"
        text = self.route.fields.get(name, "")
        focused = self.state.focus == name
        self.screen.fields[name] = FieldSpec(name, multiline, max_length, on_submit)
        if text:
            self.label(name, repr(text))
        if focused:
            self.label("focus", name)

        def focus(state: PhoneState) -> None:
            state.focus = name if keyboard else None

        widget = Widget("field", rect, rid=self.rid(name), text=text, desc=placeholder, focused=focused,
                        on_click=focus, role="multiline" if multiline else "")
        if text and clearable:
            size = min(rect.height - 16, 110)
            top = rect.top + 8 if multiline else rect.top + (rect.height - size) // 2
            clear_rect = Rect(rect.right - size - 12, top, rect.right - 12, top + size)

            def clear(state: PhoneState) -> None:
                assert state.route is not None
                state.route.fields[name] = ""
                state.focus = name if keyboard else None

            widget.children.append(Widget("icon_button", clear_rect, rid=self.rid(f"{name}_clear"),
                                          desc="Clear text", glyph="close", on_click=clear))
        return widget

    # --- lists ---------------------------------------------------------------------------

    def list_view(self, name: str, top: int = CONTENT_TOP, bottom: int | None = None) -> ListBuilder:
        """A vertical scrolling list from ``top`` to ``bottom`` (default: content bottom)."""
        viewport = Rect(0, top, WIDTH, self.bottom if bottom is None else bottom)
        return ListBuilder(self, name, viewport)


class ListBuilder:
    """Appends items to a scrolling list; :meth:`done` applies the scroll offset, clips the
    items to the viewport and labels the screen with what is actually visible."""

    ROW_H = 180

    def __init__(self, ui: UI, name: str, viewport: Rect):
        self.ui = ui
        self.name = name
        self.viewport = viewport
        self.items: list[Widget] = []
        self.tops: list[int] = []  # content y of each item
        self.y = 0

    def add(self, widget: Widget, height: int) -> Widget:
        """Adds a widget laid out at content y=0; :meth:`done` moves it to its place."""
        self.items.append(widget)
        self.tops.append(self.y)
        self.y += height
        return widget

    def header(self, text: str, height: int = 110) -> None:
        self.add(Widget("text", Rect(48, 30, WIDTH - 48, height), text=text, size=TEXT_SMALL, role="accent"),
                 height)

    def row(self, title: str, *, name: str, on_click: Handler | None = None, subtitle: str = "",
            on_long_press: Handler | None = None, avatar: str = "", avatar_color: tuple[int, int, int] | None = None,
            glyph: str = "", leading: Widget | None = None, trailing: Widget | None = None,
            height: int = ROW_H, title_size: int = TEXT_BODY) -> Widget:
        """A list row: a leading avatar (a letter), icon or picture, a title and subtitle, and
        an optional trailing widget (a switch, an icon button) that keeps its own handler."""
        ui = self.ui
        row = Widget("row", Rect(0, 0, WIDTH, height), rid=ui.rid(name), on_click=on_click,
                     on_long_press=on_long_press, desc=title)
        left = 56
        if leading is None and (avatar or glyph):
            size = min(112, height - 40)
            leading = Widget("avatar", Rect(0, 0, size, size), text=avatar, glyph=glyph, color=avatar_color)
        if leading is not None:
            width, tall = leading.rect.width, leading.rect.height
            top = (height - tall) // 2
            leading.rect = Rect(48, top, 48 + width, top + tall)
            leading.visible = leading.rect
            row.children.append(leading)
            left = 48 + width + 44
        right = WIDTH - 56
        if trailing is not None:
            width, tall = trailing.rect.width, trailing.rect.height
            top = (height - tall) // 2
            trailing.rect = Rect(WIDTH - 48 - width, top, WIDTH - 48, top + tall)
            trailing.visible = trailing.rect
            right = trailing.rect.left - 24
        if subtitle:
            row.children.append(Widget("text", Rect(left, height // 2 - 64, right, height // 2 + 2),
                                       text=title, size=title_size))
            row.children.append(Widget("text", Rect(left, height // 2 + 6, right, height // 2 + 62),
                                       text=subtitle, size=TEXT_SMALL, role="muted"))
        else:
            row.children.append(Widget("text", Rect(left, height // 2 - 32, right, height // 2 + 32),
                                       text=title, size=title_size))
        if trailing is not None:
            row.children.append(trailing)
        return self.add(row, height)

    def done(self) -> Widget:
        ui = self.ui
        content_height = self.y
        scroll = Scroll(0, content_height, self.viewport)
        route_offset = ui.route.scroll if ui.route is not None else 0
        scroll.offset = min(max(route_offset, 0), scroll.max_offset)
        container = Widget("list", self.viewport, rid=ui.rid(self.name), scroll=scroll)
        shown: list[str] = []
        for item, top in zip(self.items, self.tops, strict=True):
            item.shift(self.viewport.top + top - scroll.offset)
            item.clip(self.viewport)
            container.children.append(item)
            if item.visible is not None:
                shown.extend(f"{w.kind}:{w.text}:{w.checked}:{w.rect.top}" for w in item.walk())
        if scroll.offset:
            ui.label("scroll", scroll.offset)
        ui.label(self.name, digest(shown))
        return ui.add(container)
