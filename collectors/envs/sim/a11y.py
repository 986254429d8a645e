"""The accessibility tree of a screen, written like a ``uiautomator dump``.

Bounds are logical device pixels (1080x2400), as on a device; rows scrolled out of their
list are left out and partly visible ones report their visible part, as uiautomator does.
An empty text field reports its hint as its text, as Android 8 and later do.
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from episodelake.collectors.envs.sim.geometry import HEIGHT, WIDTH
from episodelake.collectors.envs.sim.widgets import ANDROID_CLASSES, Screen, Widget

HEADER = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>"


def dump(screen: Screen) -> str:
    lines = [HEADER, '<hierarchy rotation="0">']
    lines.append(_open(0, 1, "android.widget.FrameLayout", screen.package, "", "", "", False, False,
                       f"[0,0][{WIDTH},{HEIGHT}]", {}))
    for index, widget in enumerate(screen.widgets):
        _node(widget, index, 2, screen.package, lines)
    lines.append("  </node>")
    lines.append("</hierarchy>")
    return "\n".join(lines)


def _node(widget: Widget, index: int, depth: int, package: str, lines: list[str]) -> None:
    box = widget.visible
    if box is None:
        return
    if ":id/" in widget.rid:
        package = widget.rid.split(":id/", 1)[0]
    text = widget.text
    if widget.kind == "field" and not text:
        text = widget.desc
    flags = {
        "checkable": widget.checked is not None,
        "checked": bool(widget.checked),
        "focusable": widget.kind == "field" or widget.clickable,
        "focused": widget.focused,
        "scrollable": widget.scroll is not None,
        "long-clickable": widget.on_long_press is not None,
        "selected": widget.kind == "tab" and bool(widget.checked),
    }
    desc = widget.desc if widget.kind != "field" else ""
    if widget.kind == "slider":
        text = str(widget.value)
    bounds = f"[{box.left},{box.top}][{box.right},{box.bottom}]"
    lines.append(_open(index, depth, ANDROID_CLASSES[widget.kind], package, text, widget.rid, desc,
                       widget.clickable or widget.on_double_tap is not None, not widget.children, bounds,
                       flags))
    if widget.children:
        for child_index, child in enumerate(widget.children):
            _node(child, child_index, depth + 1, package, lines)
        lines.append("  " * depth + "</node>")


def _open(index: int, depth: int, cls: str, package: str, text: str, rid: str, desc: str, clickable: bool,
          leaf: bool, bounds: str, flags: dict[str, bool]) -> str:
    def flag(name: str) -> str:
        return "true" if flags.get(name) else "false"

    attrs = (
        f'index="{index}" text={quoteattr(text)} resource-id={quoteattr(rid)} class="{cls}" '
        f'package="{package}" content-desc={quoteattr(desc)} checkable="{flag("checkable")}" '
        f'checked="{flag("checked")}" clickable="{"true" if clickable else "false"}" enabled="true" '
        f'focusable="{flag("focusable")}" focused="{flag("focused")}" scrollable="{flag("scrollable")}" '
        f'long-clickable="{flag("long-clickable")}" password="false" selected="{flag("selected")}" '
        f'bounds="{bounds}"'
    )
    return f"{'  ' * depth}<node {attrs}{' />' if leaf else '>'}"
