"""Actions drawn onto screenshots, server-side, for `?annotated=1`, exports and reports.

Pure functions of bytes in, bytes out: no lake, no files. The markers match the web app's
SVG overlay (and the reference viewer's, which they extend): click = red ring, dot and
cross-hair; long_press = orange double ring; double_tap = two red rings; swipe = blue arrow
from its start (to its end point, or 20% of the screen in `direction`) with a green start
dot; drag = purple line, green start, red end; every other action (type, open,
system_button, wait, terminate, answer) = a labelled badge in the top-left corner.
Coordinates are normalised to [0, 1], as the steps table stores them.
"""

from __future__ import annotations

import io
import math

from PIL import Image, ImageDraw, ImageFont

from episodelake.lake.errors import InvalidInput

RED = (230, 40, 40)
ORANGE = (255, 140, 0)
BLUE = (30, 110, 255)
GREEN = (20, 190, 70)
PURPLE = (150, 60, 220)
DIRECTIONS = {"up": (0.0, -1.0), "down": (0.0, 1.0), "left": (-1.0, 0.0), "right": (1.0, 0.0)}
#: Which argument a badge shows, per action type.
BADGE_ARGS = {"type": "text", "open": "text", "answer": "text", "system_button": "button",
              "terminate": "status"}
SAVE_FORMATS = {"png": "PNG", "jpeg": "JPEG"}


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


def _ring(d: ImageDraw.ImageDraw, c: tuple[float, float], r: float, color, width: int) -> None:
    d.ellipse((c[0] - r, c[1] - r, c[0] + r, c[1] + r), outline=color, width=width)


def _dot(d: ImageDraw.ImageDraw, c: tuple[float, float], r: float, color) -> None:
    d.ellipse((c[0] - r, c[1] - r, c[0] + r, c[1] + r), fill=color)


def _arrow(d: ImageDraw.ImageDraw, a, b, color, width: int, head: float) -> None:
    d.line((a, b), fill=color, width=width)
    angle = math.atan2(b[1] - a[1], b[0] - a[0])
    left = (b[0] - head * math.cos(angle - 0.45), b[1] - head * math.sin(angle - 0.45))
    right = (b[0] - head * math.cos(angle + 0.45), b[1] - head * math.sin(angle + 0.45))
    d.polygon((b, left, right), fill=color)


def badge_text(action_type: str | None, action: dict | None) -> str:
    """The label of a badge action, e.g. `type: "hello"` or `system_button: back`."""
    kind = action_type or "unparsed"
    arg = (action or {}).get(BADGE_ARGS.get(kind, ""))
    if arg is None:
        return kind
    text = str(arg)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f'{kind}: "{text}"' if BADGE_ARGS.get(kind) == "text" else f"{kind}: {text}"


def _badge(d: ImageDraw.ImageDraw, text: str, unit: float, width: int) -> None:
    font = ImageFont.load_default(size=max(10, round(unit * 1.6)))
    pad = unit * 0.5
    while len(text) > 4 and d.textlength(text, font=font) > width - pad * 6:
        text = text[:-4] + "..."  # keep the badge on the image
    box = d.textbbox((pad * 2, pad * 2), text, font=font)
    d.rounded_rectangle((box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad),
                        radius=pad, fill=(20, 20, 20))
    d.text((pad * 2, pad * 2), text, fill=(255, 255, 255), font=font)


def draw_action(image_bytes: bytes, action_type: str | None, action: dict | None,
                x: float | None, y: float | None, x2: float | None = None, y2: float | None = None,
                *, max_side: int | None = None, fmt: str = "png") -> bytes:
    """The screenshot with the action drawn on it, encoded as `fmt` (png | jpeg).

    `max_side` first scales the image down (the reference viewer's 1200 px), so markers are
    sized for what is shown. An action without the coordinates it needs gets a badge
    instead of a marker in a made-up place.
    """
    img = _fit(_decode(image_bytes), max_side)
    d = ImageDraw.Draw(img)
    w, h = img.size
    unit = max(8.0, min(w, h) / 54)  # ~20 px on a 1080-wide phone screen
    line = max(2, round(unit / 5))
    at = (x * w, y * h) if x is not None and y is not None else None
    end = (x2 * w, y2 * h) if x2 is not None and y2 is not None else None
    kind = action_type or ""
    if kind == "click" and at:
        _ring(d, at, unit, RED, line)
        _dot(d, at, unit / 2, RED)
        d.line((at[0] - unit * 1.6, at[1], at[0] + unit * 1.6, at[1]), fill=RED, width=max(1, line // 2))
        d.line((at[0], at[1] - unit * 1.6, at[0], at[1] + unit * 1.6), fill=RED, width=max(1, line // 2))
    elif kind == "long_press" and at:
        _ring(d, at, unit * 1.2, ORANGE, line)
        _ring(d, at, unit * 0.8, ORANGE, line)
        _dot(d, at, unit / 4, ORANGE)
    elif kind == "double_tap" and at:
        _ring(d, at, unit, RED, line)
        _ring(d, at, unit * 0.6, RED, line)
        _dot(d, at, unit / 4, RED)
    elif kind == "swipe":
        start = at or (w / 2, h / 2)
        if end is None:
            dx, dy = DIRECTIONS.get(str((action or {}).get("direction", "up")).lower(), (0.0, -1.0))
            length = 0.2 * min(w, h)
            end = (start[0] + dx * length, start[1] + dy * length)
        _arrow(d, start, end, BLUE, line * 2, unit * 1.2)
        _dot(d, start, unit / 2, GREEN)
    elif kind == "drag" and at and end:
        d.line((at, end), fill=PURPLE, width=line * 2)
        _dot(d, at, unit / 2, GREEN)
        _dot(d, end, unit / 2, RED)
    else:
        _badge(d, badge_text(action_type, action), unit, w)
    return _encode(img, fmt)
