"""How a step's action is shown: its description, and that description drawn on a screenshot.

`describe` turns a stored action (action_type, action, x, y, x2, y2, and the screenshot's
size) into an `ActionView`: the summary line, the badge and the marker with its points in
normalised [0, 1] coordinates. The API sends it with every step and the web app's SVG
overlay draws it; `draw_action` draws the same object with PIL, for the API's `?annotated=1`
and for the step judge's "before" screenshot. No renderer derives geometry from raw fields,
so a person replaying an episode, the annotated image and the judge all see the same thing.

What each action becomes:
- click, long_press, double_tap: their point (red ring, dot and cross-hair; orange double
  ring; red double ring);
- swipe: a blue arrow from its start (the screen's centre when the model gave none, green
  dot) to its end, or 20% of the screen's shorter side in `direction`;
- drag: a purple line from its start (green) to its end (red); a drag whose end is missing
  shows only its start dot, with the summary in a `problem` badge;
- type, open, answer (`text`), system_button (`button`), terminate (`finish`), wait: a badge;
- anything that lacks the point it needs, and unparsed responses: a `problem` badge instead
  of a marker in a made-up place.

`draw_action` outlines every marker and arrow in white (the shapes drawn first wider in
white, then in their colours), so a red click stays seen on a red icon; the web app's
overlay outlines every marker the same way.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from typing import Any, Literal

from PIL import Image, ImageDraw, ImageFont
from pydantic import BaseModel, Field

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.action_space import action_summary

MarkerKind = Literal["click", "long_press", "double_tap", "swipe", "drag", "none"]
BadgeKind = Literal["text", "button", "finish", "wait", "problem"]


class ActionPoint(BaseModel):
    x: float = Field(ge=0, le=1, description="fraction of the screenshot's width")
    y: float = Field(ge=0, le=1, description="fraction of the screenshot's height")


class ActionMarker(BaseModel):
    """What is drawn on the screen, where. `points` by kind: click, long_press and
    double_tap their point; swipe its start and end; drag its start and end, or only its
    start when the end is missing; none no points."""

    kind: MarkerKind
    points: list[ActionPoint]


class ActionView(BaseModel):
    """How a step's action is shown: the web app's overlay and `?annotated=1` both draw
    this one description, so the two can never disagree."""

    summary: str = Field(description="one line for people, the same text the judge reads")
    badge: BadgeKind | None = Field(
        description="draw `summary` as a badge in the top-left corner, in this kind's colours; "
                    "null when the marker says it all")
    marker: ActionMarker


RED = (230, 40, 40)
ORANGE = (255, 140, 0)
BLUE = (30, 110, 255)
GREEN = (20, 190, 70)
PURPLE = (150, 60, 220)
#: Every marker's outline: it keeps a marker seen on a screen of its own colour.
WHITE = (255, 255, 255)
#: Badge backgrounds, as `.badge-<kind>` in the web app's styles.css.
BADGE_COLOURS: dict[str, tuple[int, int, int]] = {
    "text": (20, 20, 20), "button": (20, 20, 20), "wait": (20, 20, 20),
    "finish": (21, 128, 61), "problem": (198, 40, 40),
}
DIRECTION_VECTORS = {"up": (0.0, -1.0), "down": (0.0, 1.0), "left": (-1.0, 0.0), "right": (1.0, 0.0)}
#: A swipe given only a direction is drawn this long, as a fraction of the shorter side.
SWIPE_LENGTH = 0.2
BADGES: dict[str, BadgeKind] = {"type": "text", "open": "text", "answer": "text",
                                "system_button": "button", "terminate": "finish", "wait": "wait"}
SAVE_FORMATS = {"png": "PNG", "jpeg": "JPEG"}


def _point(x: float | None, y: float | None) -> ActionPoint | None:
    """A stored point, clamped into the screen; a missing or non-finite one is no point."""
    if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
        return None
    return ActionPoint(x=min(1.0, max(0.0, x)), y=min(1.0, max(0.0, y)))


def _swipe_end(start: ActionPoint, direction: Any, width: int | None, height: int | None) -> ActionPoint | None:
    """Where a swipe given only a direction ends: SWIPE_LENGTH of the shorter side away, in
    pixels, so the arrow looks as long across as down (an unknown size counts as square)."""
    step = DIRECTION_VECTORS.get(str(direction).lower()) if direction is not None else None
    if step is None:
        return None
    w, h = (width, height) if width and height else (1, 1)
    length = SWIPE_LENGTH * min(w, h)
    return _point(start.x + step[0] * length / w, start.y + step[1] * length / h)


def describe(action_type: str | None, action: Mapping[str, Any] | None,
             x: float | None, y: float | None, x2: float | None = None, y2: float | None = None,
             width: int | None = None, height: int | None = None) -> ActionView:
    """The one description of an action that every renderer draws (see the module docstring)."""
    kind = action_type or "unparsed"
    args = action or {}
    at, end = _point(x, y), _point(x2, y2)
    summary = action_summary(kind, args)
    if kind == "click" or kind == "long_press" or kind == "double_tap":
        if at:
            return ActionView(summary=summary, badge=None, marker=ActionMarker(kind=kind, points=[at]))
    elif kind == "swipe":
        start = at or ActionPoint(x=0.5, y=0.5)
        end = end or _swipe_end(start, args.get("direction"), width, height)
        if end:
            return ActionView(summary=summary, badge=None, marker=ActionMarker(kind="swipe", points=[start, end]))
    elif kind == "drag" and at:
        return ActionView(summary=summary, badge=None if end else "problem",
                          marker=ActionMarker(kind="drag", points=[at, end] if end else [at]))
    return ActionView(summary=summary, badge=BADGES.get(kind, "problem"), marker=ActionMarker(kind="none", points=[]))


def describe_step(row: Mapping[str, Any]) -> ActionView:
    """`describe` for a steps row whose `action` is already parsed into an object."""
    return describe(row.get("action_type"), row.get("action"), row.get("x"), row.get("y"),
                    row.get("x2"), row.get("y2"), row.get("width"), row.get("height"))


def _decode(image_bytes: bytes) -> Image.Image:
    try:
        img = Image.open(io.BytesIO(image_bytes))
        img.load()
    except (OSError, Image.DecompressionBombError) as exc:
        raise InvalidInput(f"image: stored bytes do not decode as an image ({exc})") from None
    return img.convert("RGB")


def _encode(img: Image.Image, fmt: str) -> bytes:
    if fmt not in SAVE_FORMATS:
        raise InvalidInput(f"fmt must be one of {sorted(SAVE_FORMATS)}, not {fmt!r}")
    out = io.BytesIO()
    if fmt == "jpeg":
        img.save(out, "JPEG", quality=88)
    else:
        img.save(out, "PNG", compress_level=1)  # speed over size: these are previews
    return out.getvalue()


def _fit(img: Image.Image, max_side: int | None) -> Image.Image:
    if max_side and max(img.size) > max_side:
        scale = max_side / max(img.size)
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))),
                         Image.Resampling.LANCZOS)
    return img


def thumbnail(image_bytes: bytes, max_side: int) -> bytes:
    """A JPEG no larger than `max_side` on its long side (filmstrips, group rows)."""
    return _encode(_fit(_decode(image_bytes), max_side), "jpeg")


class _Pen:
    """Draws a marker's shapes in their colours, or, as its outline (`outline` px), every
    shape in white and that much wider on each side. A marker is drawn twice, outline first,
    so it stays seen on a screen of its own colour (a red click on a red icon), as the web
    app's overlay does."""

    def __init__(self, d: ImageDraw.ImageDraw, outline: int = 0):
        self.d, self.outline = d, outline

    def _colour(self, colour: tuple[int, int, int]) -> tuple[int, int, int]:
        return WHITE if self.outline else colour

    def ring(self, c: tuple[float, float], r: float, colour, width: int) -> None:
        # PIL draws an ellipse's outline inside its box: grow the box by the outline and the
        # width by twice it, so the white shows on both sides of the ring.
        r, o = r + self.outline, self.outline
        self.d.ellipse((c[0] - r, c[1] - r, c[0] + r, c[1] + r), outline=self._colour(colour), width=width + 2 * o)

    def dot(self, c: tuple[float, float], r: float, colour) -> None:
        r += self.outline
        self.d.ellipse((c[0] - r, c[1] - r, c[0] + r, c[1] + r), fill=self._colour(colour))

    def line(self, a, b, colour, width: int) -> None:
        # PIL's line ends are flat: lengthen it by the outline so the white covers the ends too
        a, b = _lengthened(a, b, self.outline)
        self.d.line((a, b), fill=self._colour(colour), width=width + 2 * self.outline)

    def arrow(self, a, b, colour, width: int, head: float) -> None:
        self.line(a, b, colour, width)
        angle = math.atan2(b[1] - a[1], b[0] - a[0])
        left = (b[0] - head * math.cos(angle - 0.45), b[1] - head * math.sin(angle - 0.45))
        right = (b[0] - head * math.cos(angle + 0.45), b[1] - head * math.sin(angle + 0.45))
        self.d.polygon((b, left, right), fill=self._colour(colour))
        if self.outline:  # a line along the head's edges, centred on them, widens it all round
            self.d.line((b, left, right, b), fill=WHITE, width=2 * self.outline, joint="curve")


def _lengthened(a, b, by: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """The segment a-b, `by` px longer at each end (as it is, when a and b are one point)."""
    length = math.dist(a, b)
    if not by or not length:
        return a, b
    dx, dy = (b[0] - a[0]) / length * by, (b[1] - a[1]) / length * by
    return (a[0] - dx, a[1] - dy), (b[0] + dx, b[1] + dy)


def _marker(pen: _Pen, kind: MarkerKind, pts: list[tuple[float, float]], unit: float, line: int) -> None:
    """The shapes of each marker kind (the module docstring's list)."""
    if kind == "click":
        at = pts[0]
        pen.ring(at, unit, RED, line)
        pen.dot(at, unit / 2, RED)
        pen.line((at[0] - unit * 1.6, at[1]), (at[0] + unit * 1.6, at[1]), RED, max(1, line // 2))
        pen.line((at[0], at[1] - unit * 1.6), (at[0], at[1] + unit * 1.6), RED, max(1, line // 2))
    elif kind == "long_press":
        pen.ring(pts[0], unit * 1.2, ORANGE, line)
        pen.ring(pts[0], unit * 0.8, ORANGE, line)
        pen.dot(pts[0], unit / 4, ORANGE)
    elif kind == "double_tap":
        pen.ring(pts[0], unit, RED, line)
        pen.ring(pts[0], unit * 0.6, RED, line)
        pen.dot(pts[0], unit / 4, RED)
    elif kind == "swipe":
        pen.arrow(pts[0], pts[1], BLUE, line * 2, unit * 1.2)
        pen.dot(pts[0], unit / 2, GREEN)
    elif kind == "drag":
        if len(pts) == 2:
            pen.line(pts[0], pts[1], PURPLE, line * 2)
            pen.dot(pts[1], unit / 2, RED)
        pen.dot(pts[0], unit / 2, GREEN)


def outline_width(line: int) -> int:
    """The white outline's width on each side of a marker's strokes: half a stroke, at
    least 2 px (the web app's overlay: half a stroke, at least 1.5 px)."""
    return max(2, math.ceil(line / 2))


def _badge(d: ImageDraw.ImageDraw, text: str, colour, unit: float, width: int) -> None:
    font = ImageFont.load_default(size=max(10, round(unit * 1.6)))
    pad = unit * 0.5
    while len(text) > 4 and d.textlength(text, font=font) > width - pad * 6:
        text = text[:-4] + "..."  # keep the badge on the image
    box = d.textbbox((pad * 2, pad * 2), text, font=font)
    d.rounded_rectangle((box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad),
                        radius=pad, fill=colour)
    d.text((pad * 2, pad * 2), text, fill=(255, 255, 255), font=font)


def draw_action(image_bytes: bytes, view: ActionView, *, max_side: int | None = None,
                fmt: str = "png") -> bytes:
    """The screenshot with `view` drawn on it, encoded as `fmt` (png | jpeg).

    `max_side` first scales the image down (the reference viewer's 1200 px), so markers are
    sized for what is shown. Sizes follow the web app's overlay: one unit is 1/54 of the
    shorter side (~20 px on a 1080-wide phone screen), at least 8 px; the white outline
    is half a stroke wide (`outline_width`).
    """
    img = _fit(_decode(image_bytes), max_side)
    d = ImageDraw.Draw(img)
    w, h = img.size
    unit = max(8.0, min(w, h) / 54)
    line = max(2, round(unit / 5))
    pts = [(p.x * w, p.y * h) for p in view.marker.points]
    if view.marker.kind != "none":
        _marker(_Pen(d, outline=outline_width(line)), view.marker.kind, pts, unit, line)
        _marker(_Pen(d), view.marker.kind, pts, unit, line)
    if view.badge is not None:
        _badge(d, view.summary, BADGE_COLOURS[view.badge], unit, w)
    return _encode(img, fmt)
