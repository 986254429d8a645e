"""Icons drawn from primitives, so the phone needs no icon font or image files.

Each painter draws one glyph into a box (render pixels) in one colour. Unknown glyph names
fall back to the name's first letter, which keeps product pictures and odd icons legible.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from PIL import ImageDraw

Color = tuple[int, int, int]
Box = tuple[float, float, float, float]
Painter = Callable[[ImageDraw.ImageDraw, Box, Color], None]


def _unit(box: Box) -> tuple[float, float, float, float]:
    """Centre and half-size of the square inscribed in the box, plus a stroke width."""
    x0, y0, x1, y1 = box
    half = min(x1 - x0, y1 - y0) / 2
    return (x0 + x1) / 2, (y0 + y1) / 2, half, max(1.0, half / 6)


def _pts(box: Box, points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Maps points given in a -1..1 square onto the box."""
    cx, cy, h, _ = _unit(box)
    return [(cx + x * h * 0.8, cy + y * h * 0.8) for x, y in points]


def _lines(points: list[tuple[float, float]], closed: bool = False) -> Painter:
    def paint(d: ImageDraw.ImageDraw, box: Box, c: Color) -> None:
        pts = _pts(box, points + (points[:1] if closed else []))
        d.line(pts, fill=c, width=round(_unit(box)[3]), joint="curve")

    return paint


def _strokes(*paths: list[tuple[float, float]]) -> Painter:
    def paint(d: ImageDraw.ImageDraw, box: Box, c: Color) -> None:
        for path in paths:
            _lines(path)(d, box, c)

    return paint


def _polygon(points: list[tuple[float, float]]) -> Painter:
    def paint(d: ImageDraw.ImageDraw, box: Box, c: Color) -> None:
        d.polygon(_pts(box, points), fill=c)

    return paint


def _circle(d: ImageDraw.ImageDraw, box: Box, c: Color, r: float, dx: float = 0, dy: float = 0,
            fill: bool = False) -> None:
    cx, cy, h, w = _unit(box)
    cx, cy, r = cx + dx * h, cy + dy * h, r * h
    d.ellipse((cx - r, cy - r, cx + r, cy + r), outline=None if fill else c, fill=c if fill else None,
              width=round(w))


def _gear(d, box, c):
    _circle(d, box, c, 0.55)
    _circle(d, box, c, 0.2, fill=True)
    cx, cy, h, w = _unit(box)
    for i in range(8):
        a = i * math.pi / 4
        d.line([(cx + math.cos(a) * h * 0.55, cy + math.sin(a) * h * 0.55),
                (cx + math.cos(a) * h * 0.8, cy + math.sin(a) * h * 0.8)], fill=c, width=round(w * 1.6))


def _clock(d, box, c):
    _circle(d, box, c, 0.75)
    _lines([(0, -0.55), (0, 0), (0.4, 0.25)])(d, box, c)


def _notes(d, box, c):
    _lines([(-0.55, -0.75), (0.55, -0.75), (0.55, 0.75), (-0.55, 0.75)], closed=True)(d, box, c)
    for y in (-0.35, 0, 0.35):
        _lines([(-0.3, y), (0.3, y)])(d, box, c)


def _person(d, box, c):
    _circle(d, box, c, 0.3, dy=-0.35, fill=True)
    cx, cy, h, _ = _unit(box)
    d.pieslice((cx - h * 0.65, cy + h * 0.05, cx + h * 0.65, cy + h * 1.2), 180, 360, fill=c)


def _person_add(d, box, c):
    _person(d, (box[0] - (box[2] - box[0]) * 0.15, box[1], box[2] - (box[2] - box[0]) * 0.15, box[3]), c)
    _lines([(0.55, -0.2), (0.95, -0.2)])(d, box, c)
    _lines([(0.75, -0.4), (0.75, 0.0)])(d, box, c)


def _call(d, box, c):
    _polygon([(-0.75, -0.55), (-0.45, -0.8), (-0.2, -0.45), (-0.35, -0.25), (0.2, 0.35), (0.35, 0.2),
              (0.75, 0.45), (0.5, 0.8), (0.1, 0.7), (-0.5, 0.1), (-0.8, -0.3)])(d, box, c)


def _call_end(d, box, c):
    _polygon([(-0.9, 0.2), (-0.8, -0.15), (0, -0.35), (0.8, -0.15), (0.9, 0.2), (0.5, 0.35), (0.4, 0.05),
              (-0.4, 0.05), (-0.5, 0.35)])(d, box, c)


def _message(d, box, c):
    _polygon([(-0.8, -0.7), (0.8, -0.7), (0.8, 0.4), (-0.3, 0.4), (-0.7, 0.8), (-0.6, 0.4), (-0.8, 0.4)])(d, box, c)


def _bag(d, box, c):
    _polygon([(-0.7, -0.3), (0.7, -0.3), (0.6, 0.8), (-0.6, 0.8)])(d, box, c)
    _lines([(-0.35, -0.3), (-0.35, -0.6), (0.35, -0.6), (0.35, -0.3)])(d, box, c)


def _cart(d, box, c):
    _lines([(-0.9, -0.7), (-0.6, -0.7), (-0.35, 0.35), (0.6, 0.35), (0.8, -0.4), (-0.5, -0.4)])(d, box, c)
    _circle(d, box, c, 0.12, dx=-0.3, dy=0.65, fill=True)
    _circle(d, box, c, 0.12, dx=0.5, dy=0.65, fill=True)


def _star(d, box, c, fill=False):
    points = []
    for i in range(10):
        r = 0.9 if i % 2 == 0 else 0.4
        a = -math.pi / 2 + i * math.pi / 5
        points.append((math.cos(a) * r, math.sin(a) * r))
    if fill:
        _polygon(points)(d, box, c)
    else:
        _lines(points, closed=True)(d, box, c)


def _heart(d, box, c, fill=False):
    """Two half circles over a point."""
    points = [(0.0, 0.8)]
    for cx in (-0.42, 0.42):
        points += [(cx - 0.42 * math.cos(math.pi * i / 20), -0.25 - 0.42 * math.sin(math.pi * i / 20))
                   for i in range(21)]
    points.append((0.0, 0.8))
    if fill:
        _polygon(points)(d, box, c)
    else:
        _lines(points)(d, box, c)


def _wifi(d, box, c):
    cx, cy, h, w = _unit(box)
    for r in (0.35, 0.6, 0.85):
        d.arc((cx - r * h, cy - r * h + h * 0.45, cx + r * h, cy + r * h + h * 0.45), 225, 315, fill=c,
              width=round(w))
    _circle(d, box, c, 0.1, dy=0.45, fill=True)


def _bluetooth(d, box, c):
    _lines([(-0.45, -0.35), (0.4, 0.4), (0, 0.8), (0, -0.8), (0.4, -0.4), (-0.45, 0.35)])(d, box, c)


def _airplane(d, box, c):
    _polygon([(0, -0.9), (0.12, -0.6), (0.12, -0.15), (0.85, 0.25), (0.85, 0.4), (0.12, 0.15), (0.12, 0.55),
              (0.35, 0.75), (0.35, 0.85), (0, 0.75), (-0.35, 0.85), (-0.35, 0.75), (-0.12, 0.55), (-0.12, 0.15),
              (-0.85, 0.4), (-0.85, 0.25), (-0.12, -0.15), (-0.12, -0.6)])(d, box, c)


def _sun(d, box, c):
    _circle(d, box, c, 0.35, fill=True)
    cx, cy, h, w = _unit(box)
    for i in range(8):
        a = i * math.pi / 4
        d.line([(cx + math.cos(a) * h * 0.55, cy + math.sin(a) * h * 0.55),
                (cx + math.cos(a) * h * 0.8, cy + math.sin(a) * h * 0.8)], fill=c, width=round(w))


def _moon(d, box, c):
    cx, cy, h, _ = _unit(box)
    d.pieslice((cx - h * 0.7, cy - h * 0.7, cx + h * 0.7, cy + h * 0.7), 90, 270, fill=c)
    d.chord((cx - h * 0.35, cy - h * 0.7, cx + h * 0.35, cy + h * 0.7), 270, 90, fill=c)


def _speaker(d, box, c):
    _polygon([(-0.8, -0.25), (-0.4, -0.25), (0.1, -0.7), (0.1, 0.7), (-0.4, 0.25), (-0.8, 0.25)])(d, box, c)
    cx, cy, h, w = _unit(box)
    d.arc((cx - h * 0.5, cy - h * 0.5, cx + h * 0.5, cy + h * 0.5), 300, 60, fill=c, width=round(w))


def _bell(d, box, c):
    _polygon([(-0.6, 0.5), (-0.45, 0.3), (-0.45, -0.2), (-0.2, -0.6), (0.2, -0.6), (0.45, -0.2), (0.45, 0.3),
              (0.6, 0.5)])(d, box, c)
    _circle(d, box, c, 0.15, dy=0.7, fill=True)


def _battery(d, box, c):
    _lines([(-0.4, -0.7), (0.4, -0.7), (0.4, 0.85), (-0.4, 0.85)], closed=True)(d, box, c)
    _polygon([(-0.4, 0.1), (0.4, 0.1), (0.4, 0.85), (-0.4, 0.85)])(d, box, c)
    _lines([(-0.15, -0.85), (0.15, -0.85)])(d, box, c)


def _grid(d, box, c):
    for dx in (-0.45, 0.45):
        for dy in (-0.45, 0.45):
            _circle(d, box, c, 0.22, dx=dx * 0.8, dy=dy * 0.8, fill=True)


def _lock(d, box, c):
    _polygon([(-0.6, -0.1), (0.6, -0.1), (0.6, 0.8), (-0.6, 0.8)])(d, box, c)
    cx, cy, h, w = _unit(box)
    d.arc((cx - h * 0.38, cy - h * 0.75, cx + h * 0.38, cy + h * 0.2), 180, 360, fill=c, width=round(w))


def _info(d, box, c):
    _circle(d, box, c, 0.8)
    _lines([(0, -0.05), (0, 0.45)])(d, box, c)
    _circle(d, box, c, 0.08, dy=-0.35, fill=True)


def _search(d, box, c):
    _circle(d, box, c, 0.45, dx=-0.15, dy=-0.15)
    _lines([(0.2, 0.2), (0.7, 0.7)])(d, box, c)


def _backspace(d, box, c):
    _lines([(-0.9, 0), (-0.4, -0.6), (0.85, -0.6), (0.85, 0.6), (-0.4, 0.6)], closed=True)(d, box, c)
    _lines([(-0.05, -0.25), (0.45, 0.25)])(d, box, c)
    _lines([(-0.05, 0.25), (0.45, -0.25)])(d, box, c)


def _share(d, box, c):
    for dx, dy in ((0.5, -0.55), (-0.5, 0), (0.5, 0.55)):
        _circle(d, box, c, 0.18, dx=dx * 0.8, dy=dy * 0.8, fill=True)
    _lines([(0.5, -0.55), (-0.5, 0), (0.5, 0.55)])(d, box, c)


def _delete(d, box, c):
    _lines([(-0.5, -0.45), (-0.4, 0.8), (0.4, 0.8), (0.5, -0.45)], closed=True)(d, box, c)
    _lines([(-0.7, -0.6), (0.7, -0.6)])(d, box, c)
    _lines([(-0.2, -0.8), (0.2, -0.8)])(d, box, c)


def _edit(d, box, c):
    _polygon([(-0.75, 0.75), (-0.65, 0.35), (0.35, -0.65), (0.65, -0.35), (-0.35, 0.65)])(d, box, c)


def _more(d, box, c):
    for dy in (-0.6, 0, 0.6):
        _circle(d, box, c, 0.13, dy=dy * 0.8, fill=True)


def _video(d, box, c):
    _polygon([(-0.8, -0.45), (0.3, -0.45), (0.3, 0.45), (-0.8, 0.45)])(d, box, c)
    _polygon([(0.35, 0), (0.85, -0.4), (0.85, 0.4)])(d, box, c)


def _nav_home(d, box, c):
    _circle(d, box, c, 0.45)


def _nav_recent(d, box, c):
    _lines([(-0.4, -0.4), (0.4, -0.4), (0.4, 0.4), (-0.4, 0.4)], closed=True)(d, box, c)


def _signal(d, box, c):
    _polygon([(0.7, -0.7), (0.7, 0.7), (-0.7, 0.7)])(d, box, c)


def _nfc(d, box, c):
    _lines([(-0.7, -0.7), (0.7, -0.7), (0.7, 0.7), (-0.7, 0.7)], closed=True)(d, box, c)
    _lines([(-0.3, 0.4), (-0.3, -0.4), (0.3, 0.4), (0.3, -0.4)])(d, box, c)


def _hotspot(d, box, c):
    _circle(d, box, c, 0.12, fill=True)
    _circle(d, box, c, 0.45)
    _circle(d, box, c, 0.8)


PAINTERS: dict[str, Painter] = {
    "settings": _gear, "clock": _clock, "notes": _notes, "contacts": _person, "phone": _call,
    "messages": _message, "shop": _bag,
    "back": _lines([(0.8, 0), (-0.8, 0), (-0.2, -0.6), (-0.8, 0), (-0.2, 0.6)]),
    "close": _strokes([(-0.6, -0.6), (0.6, 0.6)], [(-0.6, 0.6), (0.6, -0.6)]),
    "plus": _strokes([(-0.7, 0), (0.7, 0)], [(0, -0.7), (0, 0.7)]),
    "minus": _lines([(-0.7, 0), (0.7, 0)]),
    "check": _lines([(-0.7, 0), (-0.2, 0.5), (0.7, -0.5)]),
    "up": _lines([(-0.6, 0.3), (0, -0.3), (0.6, 0.3)]),
    "down": _lines([(-0.6, -0.3), (0, 0.3), (0.6, -0.3)]),
    "send": _polygon([(-0.8, -0.75), (0.85, 0), (-0.8, 0.75), (-0.55, 0)]),
    "shift": _lines([(0, -0.7), (-0.65, 0.05), (-0.3, 0.05), (-0.3, 0.6), (0.3, 0.6), (0.3, 0.05), (0.65, 0.05)],
                    closed=True),
    "enter": _lines([(0.7, -0.6), (0.7, 0.2), (-0.7, 0.2), (-0.3, -0.2), (-0.7, 0.2), (-0.3, 0.6)]),
    "space": _lines([(-0.7, 0.1), (-0.7, 0.4), (0.7, 0.4), (0.7, 0.1)]),
    "nav_back": _polygon([(0.45, -0.55), (0.45, 0.55), (-0.5, 0)]),
    "nav_home": _nav_home,
    "nav_recent_apps": _nav_recent,
    "call": _call, "call_end": _call_end, "message": _message, "cart": _cart, "search": _search,
    "star": _star, "heart": _heart, "wifi": _wifi, "bluetooth": _bluetooth, "airplane": _airplane,
    "display": _sun, "moon": _moon, "sound": _speaker, "speaker": _speaker, "bell": _bell,
    "battery": _battery, "apps": _grid, "storage": _grid, "lock": _lock, "info": _info,
    "backspace": _backspace, "share": _share, "delete": _delete, "edit": _edit, "more": _more,
    "video": _video, "person_add": _person_add, "signal": _signal, "nfc": _nfc, "hotspot": _hotspot,
    "watch": _clock, "notebook": _notes,
}

FILLED: dict[str, Painter] = {
    "star": lambda d, b, c: _star(d, b, c, fill=True),
    "heart": lambda d, b, c: _heart(d, b, c, fill=True),
}


def paint(draw: ImageDraw.ImageDraw, glyph: str, box: Box, color: Color, *, filled: bool = False,
          letter: Callable[[str, Box, Color], None] | None = None) -> None:
    """Draws ``glyph`` into ``box``; a glyph with no painter is drawn as its first letter by
    ``letter`` (the renderer's text function)."""
    painter = (FILLED.get(glyph) if filled else None) or PAINTERS.get(glyph)
    if painter is not None:
        painter(draw, box, color)
    elif letter is not None and glyph:
        letter(glyph[0].upper(), box, color)
