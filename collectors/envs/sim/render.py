"""Draws a laid-out :class:`Screen` into a Pillow image and encodes it as PNG.

Speed matters (a demo records thousands of frames), so text is rasterised once per
(text, size) into a cached mask and pasted, drawing happens at half the logical size, and
PNG encoding uses one fixed, fast zlib level. Nothing here reads the clock or any random
source: the same screen always gives the same bytes.
"""

from __future__ import annotations

import struct
import zlib
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from episodelake.collectors.envs.sim import icons
from episodelake.collectors.envs.sim.geometry import IMAGE_SIZE, RENDER_SCALE, Rect
from episodelake.collectors.envs.sim.widgets import Screen, Widget

Color = tuple[int, int, int]

#: zlib level of every PNG the phone writes; fixed so that bytes are reproducible.
PNG_COMPRESS_LEVEL = 1
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: Each role's colour as (light theme, dark theme): one row per role, so neither theme can
#: lack a colour the other has.
PALETTE: dict[str, tuple[Color, Color]] = {
    "bg": ((250, 250, 252), (18, 18, 22)),
    "surface": ((238, 240, 246), (36, 37, 44)),
    "surface_high": ((226, 230, 240), (48, 50, 58)),
    "text": ((28, 27, 31), (230, 230, 236)),
    "muted": ((96, 98, 108), (160, 162, 172)),
    "primary": ((26, 115, 232), (138, 180, 248)),
    "on_primary": ((255, 255, 255), (8, 32, 70)),
    "tonal": ((211, 227, 253), (40, 64, 100)),
    "on_tonal": ((4, 30, 73), (214, 227, 255)),
    "outline": ((120, 122, 132), (140, 142, 152)),
    "master_on": ((211, 227, 253), (40, 64, 100)),
    "master_off": ((226, 230, 240), (48, 50, 58)),
    "keyboard": ((226, 230, 236), (32, 33, 38)),
    "key": ((255, 255, 255), (62, 64, 72)),
    "key_special": ((200, 206, 216), (44, 46, 54)),
    "toast": ((50, 50, 56), (226, 226, 232)),
    "on_toast": ((240, 240, 244), (28, 28, 32)),
    "danger": ((217, 48, 37), (242, 139, 130)),
    "call": ((30, 142, 62), (129, 201, 149)),
    "wallpaper_top": ((98, 143, 220), (26, 38, 70)),
    "wallpaper_bottom": ((214, 170, 205), (70, 40, 72)),
    "bubble_theirs": ((226, 230, 240), (48, 50, 58)),
    "disabled": ((200, 202, 208), (60, 62, 70)),
    "on_disabled": ((140, 142, 150), (120, 122, 130)),
    "call_background": ((24, 40, 72), (12, 20, 40)),
    "star": ((240, 170, 0), (250, 200, 60)),
}
LIGHT: dict[str, Color] = {role: light for role, (light, _) in PALETTE.items()}
DARK: dict[str, Color] = {role: dark for role, (_, dark) in PALETTE.items()}


def s(value: float) -> int:
    """Logical pixels to render pixels."""
    return round(value * RENDER_SCALE)


@lru_cache(maxsize=64)
def font(size: int) -> ImageFont.FreeTypeFont:
    """Pillow's bundled default font at a render-pixel size (no font files needed)."""
    return ImageFont.load_default(size=size)  # type: ignore[return-value]  # a FreeTypeFont when size is given


@lru_cache(maxsize=8192)
def text_mask(text: str, size: int) -> tuple[Image.Image, int, int]:
    """The text rasterised as an L mask, with the offset of its ink from the pen position."""
    face = font(size)
    left, top, right, bottom = (int(v) for v in face.getbbox(text))  # whole pixels, typed float
    mask = Image.new("L", (max(1, right - left), max(1, bottom - top)), 0)
    ImageDraw.Draw(mask).text((-left, -top), text, font=face, fill=255)
    return mask, left, top


@lru_cache(maxsize=8192)
def text_width(text: str, size: int) -> float:
    return font(size).getlength(text)


@lru_cache(maxsize=4)
def _wallpaper(top: Color, bottom: Color) -> Image.Image:
    """A vertical gradient, made once per theme and pasted on every home-screen frame."""
    column = Image.new("RGB", (1, 256))
    for y in range(256):
        t = y / 255
        column.putpixel((0, y), tuple(round(a + (b - a) * t) for a, b in zip(top, bottom, strict=True)))
    return column.resize(IMAGE_SIZE, Image.Resampling.BILINEAR)


class Canvas:
    """An image plus an origin in logical pixels, so a scrolled list can be drawn into its own
    layer (and clipped to it) with the same drawing code as the screen."""

    def __init__(self, image: Image.Image, palette: dict[str, Color], origin: tuple[int, int] = (0, 0)):
        self.image = image
        self.draw = ImageDraw.Draw(image)
        self.palette = palette
        self.ox, self.oy = origin

    def box(self, rect: Rect) -> tuple[int, int, int, int]:
        return (s(rect.left - self.ox), s(rect.top - self.oy), s(rect.right - self.ox) - 1,
                s(rect.bottom - self.oy) - 1)

    def color(self, role: str) -> Color:
        return self.palette[role]

    def rect(self, rect: Rect, fill: Color, radius: int = 0, outline: Color | None = None,
             width: int = 0) -> None:
        box = self.box(rect)
        if radius:
            self.draw.rounded_rectangle(box, radius=s(radius), fill=fill, outline=outline, width=width)
        else:
            self.draw.rectangle(box, fill=fill, outline=outline, width=width)

    def ellipse(self, rect: Rect, fill: Color) -> None:
        self.draw.ellipse(self.box(rect), fill=fill)

    def text(self, rect: Rect, text: str, size: int, color: Color, align: str = "left",
             wrap: bool = False) -> None:
        """Text in a box: vertically centred on one line (cut with "..." when too wide), or
        wrapped from the top when ``wrap`` is set."""
        if not text:
            return
        px = s(size)
        ascent, descent = font(px).getmetrics()
        width = s(rect.width)
        lines = _wrap(text, px, width) if wrap else [_ellipsize(text, px, width)]
        line_h = ascent + descent + px // 5
        if wrap:
            y = s(rect.top - self.oy) + px // 4
        else:
            y = s(rect.top - self.oy) + (s(rect.height) - (ascent + descent)) // 2
        bottom = s(rect.bottom - self.oy)
        for line in lines:
            if y + ascent > bottom and wrap:
                break
            self._line(rect, line, px, y, color, align)
            y += line_h

    def _line(self, rect: Rect, line: str, px: int, y: int, color: Color, align: str) -> None:
        if not line:
            return
        mask, dx, dy = text_mask(line, px)
        x = s(rect.left - self.ox)
        if align == "center":
            x += (s(rect.width) - round(text_width(line, px))) // 2
        elif align == "right":
            x += s(rect.width) - round(text_width(line, px))
        self.image.paste(color, (x + dx, y + dy), mask)

    def glyph(self, glyph: str, rect: Rect, color: Color, filled: bool = False) -> None:
        box = self.box(rect)
        icons.paint(self.draw, glyph, box, color, filled=filled,
                    letter=lambda ch, b, c: self.text(rect, ch, round(rect.height * 0.6), c, align="center"))


def _ellipsize(text: str, px: int, width: int) -> str:
    if text_width(text, px) <= width:
        return text
    while text and text_width(text + "...", px) > width:
        text = text[:-1]
    return text + "..."


def _wrap(text: str, px: int, width: int) -> list[str]:
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            candidate = f"{line} {word}" if line else word
            if text_width(candidate, px) <= width or not line:
                line = candidate
            else:
                lines.append(line)
                line = word
        lines.append(line)
    return lines


# --- widgets ----------------------------------------------------------------------------------

def _text_color(canvas: Canvas, role: str) -> Color:
    return {
        "muted": canvas.color("muted"), "accent": canvas.color("primary"), "on_dark": (240, 240, 245),
    }.get(role, canvas.color("text"))


def _frame(c: Canvas, w: Widget) -> None:
    role = w.role
    if role == "wallpaper":
        layer = _wallpaper(c.color("wallpaper_top"), c.color("wallpaper_bottom"))
        box = c.box(w.rect)
        c.image.paste(layer.crop((box[0], box[1], box[2] + 1, box[3] + 1)), box[:2])
    elif role in ("tab_bar", "compose_bar", "drawer"):
        c.rect(w.rect, c.color("surface"))
    elif role == "keyboard":
        c.rect(w.rect, c.color("keyboard"))
    elif role == "dock":
        c.rect(w.rect, c.color("surface"), radius=80)
    elif role == "call_background":
        c.rect(w.rect, c.color("call_background"))


def _button(c: Canvas, w: Widget) -> None:
    role = w.role
    if role == "time":
        c.text(Rect(w.rect.left, w.rect.top, w.rect.right, w.rect.bottom - 80), w.text, w.size,
               c.color("primary"), align="center")
        return
    if role == "search_pill":
        c.rect(w.rect, c.color("surface"), radius=w.rect.height // 2)
        c.glyph("search", Rect(w.rect.left + 40, w.rect.top + 40, w.rect.left + 110, w.rect.bottom - 40),
                c.color("muted"))
        c.text(Rect(w.rect.left + 150, w.rect.top, w.rect.right, w.rect.bottom), w.text, w.size, c.color("muted"))
        return
    fills = {"filled": ("primary", "on_primary"), "tonal": ("tonal", "on_tonal"), "disabled": ("disabled", "on_disabled"),
             "danger": ("danger", "on_primary")}
    radius = min(w.rect.height // 2, 90)
    if role in fills:
        bg, fg = fills[role]
        c.rect(w.rect, c.color(bg), radius=radius)
        c.text(w.rect, w.text, w.size, c.color(fg), align="center")
    elif role == "outlined":
        c.rect(w.rect, c.color("bg"), radius=radius, outline=c.color("outline"), width=2)
        c.text(w.rect, w.text, w.size, c.color("primary"), align="center")
    else:
        c.text(w.rect, w.text, w.size, c.color("primary"), align="center")


def _icon_button(c: Canvas, w: Widget) -> None:
    role = w.role
    color = c.color("text") if role != "disabled" else c.color("disabled")
    if role == "tonal":
        c.ellipse(w.rect.inset(8), c.color("tonal"))
        color = c.color("on_tonal")
    elif role == "primary":
        c.ellipse(w.rect.inset(8), c.color("primary"))
        color = c.color("on_primary")
    elif role == "nav":
        color = c.color("muted")
    if w.glyph in ("star", "heart") and w.checked:
        color = c.color("star")
    cx, cy = w.rect.center
    half = min(w.rect.width, w.rect.height) // 5
    glyph_rect = Rect(cx - half, cy - half, cx + half, cy + half)
    if w.children and role == "tonal":  # a labelled action (Call, Text): glyph in the upper part
        glyph_rect = Rect(cx - 45, w.rect.top + 45, cx + 45, w.rect.top + 135)
    c.glyph(w.glyph, glyph_rect, color, filled=bool(w.checked))
    if w.text:  # a count badge (the cart)
        badge = Rect(w.rect.right - 60, w.rect.top + 10, w.rect.right, w.rect.top + 70)
        c.ellipse(badge, c.color("danger"))
        c.text(badge, w.text, 34, (255, 255, 255), align="center")


def _fab(c: Canvas, w: Widget) -> None:
    if w.role in ("call", "danger"):
        c.ellipse(w.rect, c.color(w.role))
        c.glyph(w.glyph, w.rect.inset(w.rect.width // 4), (255, 255, 255))
    else:
        c.rect(w.rect, c.color("tonal"), radius=48)
        c.glyph(w.glyph, w.rect.inset(w.rect.width // 4), c.color("on_tonal"))


def _app_icon(c: Canvas, w: Widget, on_wallpaper: bool) -> None:
    label = Rect(w.rect.left - 20, w.rect.bottom - 80, w.rect.right + 20, w.rect.bottom)
    light = on_wallpaper and w.role != "dock"
    c.text(label, w.text, w.size, (255, 255, 255) if light else c.color("text"), align="center")


def _image(c: Canvas, w: Widget) -> None:
    if w.role == "status":
        c.glyph(w.glyph, w.rect, c.color("text"))
        return
    if w.glyph == "heart":
        c.ellipse(w.rect, c.color("bg"))
        c.glyph("heart", w.rect.inset(w.rect.width // 5), c.color("danger") if w.checked else c.color("muted"),
                filled=bool(w.checked))
        return
    fill = w.color or c.color("primary")
    c.rect(w.rect, fill, radius=w.rect.width // 4 if w.role == "app_tile" else 36)
    c.glyph(w.glyph, w.rect.inset(w.rect.width // 4, w.rect.height // 4), (255, 255, 255))


def _row(c: Canvas, w: Widget) -> None:
    if w.role in ("master_on", "master_off"):
        c.rect(w.rect.inset(32, 12), c.color(w.role), radius=60)
    elif w.role == "menu_item":
        c.text(w.rect.inset(50, 0), w.text, w.size, c.color("text"))


def _card(c: Canvas, w: Widget) -> None:
    if w.role == "note":
        c.rect(w.rect, c.color("bg"), radius=36, outline=c.color("surface_high"), width=2)
    else:
        c.rect(w.rect, c.color("surface"), radius=40)


def _avatar(c: Canvas, w: Widget) -> None:
    c.ellipse(w.rect, w.color or c.color("tonal"))
    if w.text:
        c.text(w.rect, w.text, round(w.rect.height * 0.45), (255, 255, 255), align="center")
    else:
        c.glyph(w.glyph, w.rect.inset(w.rect.width // 4), c.color("on_tonal"))


def _switch(c: Canvas, w: Widget) -> None:
    r = w.rect
    radius = r.height // 2
    if w.checked:
        c.rect(r, c.color("primary"), radius=radius)
        c.ellipse(Rect(r.right - r.height + 10, r.top + 10, r.right - 10, r.bottom - 10), c.color("on_primary"))
    else:
        c.rect(r, c.color("surface_high"), radius=radius, outline=c.color("outline"), width=2)
        c.ellipse(Rect(r.left + 20, r.top + 20, r.left + r.height - 20, r.bottom - 20), c.color("outline"))


def _slider(c: Canvas, w: Widget) -> None:
    r = w.rect
    cy = (r.top + r.bottom) // 2
    value = w.value or 0
    knob_x = r.left + 30 + (r.width - 60) * value // 100
    c.rect(Rect(r.left + 30, cy - 12, r.right - 30, cy + 12), c.color("surface_high"), radius=12)
    c.rect(Rect(r.left + 30, cy - 12, max(r.left + 31, knob_x), cy + 12), c.color("primary"), radius=12)
    c.ellipse(Rect(knob_x - 30, cy - 30, knob_x + 30, cy + 30), c.color("primary"))


def _field(c: Canvas, w: Widget) -> None:
    r = w.rect
    multiline = w.role == "multiline"
    if w.role == "dial_display":
        c.text(r, w.text, w.size, c.color("text"), align="center")
        return
    if w.focused:
        c.rect(r, c.color("bg"), radius=28, outline=c.color("primary"), width=3)
    else:
        c.rect(r, c.color("surface"), radius=28)
    inner = Rect(r.left + 40, r.top, r.right - (130 if w.children else 40), r.bottom if not multiline else r.bottom - 20)
    if w.text:
        c.text(inner, w.text, w.size, c.color("text"), wrap=multiline)
    else:
        c.text(inner, w.desc, w.size, c.color("muted"), wrap=multiline)
    if w.focused:  # the cursor, after the last character
        px = s(w.size)
        ascent, descent = font(px).getmetrics()
        lines = _wrap(w.text, px, s(inner.width)) if multiline and w.text else [w.text.split("\n")[-1]]
        x = min(s(inner.right - c.ox), s(inner.left - c.ox) + round(text_width(lines[-1], px)) + 2)
        if multiline:
            y = s(inner.top - c.oy) + px // 4 + (len(lines) - 1) * (ascent + descent + px // 5)
        else:
            y = s(inner.top - c.oy) + (s(inner.height) - (ascent + descent)) // 2
        c.draw.rectangle((x, y, x + 1, y + ascent + descent), fill=c.color("primary"))


def _key(c: Canvas, w: Widget) -> None:
    if w.role == "dial_key":
        c.ellipse(w.rect.inset(20, 0), c.color("surface"))
        c.text(Rect(w.rect.left, w.rect.top, w.rect.right, w.rect.bottom - 50), w.text, w.size, c.color("text"),
               align="center")
        return
    active = w.checked
    fill = c.color("primary") if active else c.color("key_special" if w.role == "key_special" else "key")
    c.rect(w.rect, fill, radius=24)
    ink = c.color("on_primary") if active else c.color("text")
    if w.glyph:
        c.glyph(w.glyph, w.rect.inset(w.rect.width // 3, w.rect.height // 3), ink)
    else:
        c.text(w.rect, w.text, 64 if len(w.text) == 1 else 44, ink, align="center")


def _tab(c: Canvas, w: Widget) -> None:
    if w.checked:
        c.rect(Rect(w.rect.left + 60, w.rect.top + 20, w.rect.right - 60, w.rect.top + 90), c.color("tonal"),
               radius=35)
    c.text(Rect(w.rect.left, w.rect.top + 90, w.rect.right, w.rect.bottom - 10), w.text, w.size,
           c.color("text") if w.checked else c.color("muted"), align="center")


def _bubble(c: Canvas, w: Widget) -> None:
    mine = w.role == "mine"
    c.rect(w.rect, c.color("primary") if mine else c.color("bubble_theirs"), radius=50)
    c.text(w.rect.inset(40, 10), w.text, w.size, c.color("on_primary") if mine else c.color("text"), wrap=True)


def _dialog(c: Canvas, w: Widget) -> None:
    if w.role == "menu":
        c.rect(w.rect.shifted(8), c.color("outline"), radius=24)
        c.rect(w.rect, c.color("surface_high"), radius=24)
    else:
        c.rect(w.rect, c.color("surface"), radius=56)


def _scrim(c: Canvas, w: Widget) -> None:
    darker = c.image.point(lambda v: v * 45 // 100)
    c.image.paste(darker)


def _toast(c: Canvas, w: Widget) -> None:
    c.rect(w.rect, c.color("toast"), radius=w.rect.height // 2)
    c.text(w.rect.inset(30, 0), w.text, w.size, c.color("on_toast"), align="center")


def _plain_text(c: Canvas, w: Widget) -> None:
    wrap = w.rect.height >= 2.2 * w.size
    c.text(w.rect, w.text, w.size, _text_color(c, w.role), align=w.align, wrap=wrap)


PAINTERS = {
    "frame": _frame, "text": _plain_text, "button": _button, "icon_button": _icon_button, "fab": _fab,
    "image": _image, "row": _row, "card": _card, "avatar": _avatar, "switch": _switch, "slider": _slider,
    "field": _field, "key": _key, "tab": _tab, "bubble": _bubble, "dialog": _dialog, "scrim": _scrim,
    "toast": _toast,
}


def _paint(c: Canvas, w: Widget, on_wallpaper: bool) -> None:
    if w.kind == "list":
        _paint_list(c, w, on_wallpaper)
        return
    if w.kind == "app_icon":
        for child in w.children:
            _paint(c, child, on_wallpaper)
        _app_icon(c, w, on_wallpaper)
        return
    PAINTERS[w.kind](c, w)
    for child in w.children:
        _paint(c, child, on_wallpaper)


def _paint_list(c: Canvas, w: Widget, on_wallpaper: bool) -> None:
    """Items are drawn into a layer the size of the viewport, which clips partly visible rows."""
    view = w.rect
    box = c.box(view)
    layer = Image.new("RGB", (box[2] - box[0] + 1, box[3] - box[1] + 1), c.color("bg"))
    sub = Canvas(layer, c.palette, origin=(view.left, view.top))
    for item in w.children:
        if item.visible is not None:
            _paint(sub, item, on_wallpaper)
    c.image.paste(layer, box[:2])


def render(screen: Screen) -> Image.Image:
    """The screen as an RGB image of ``IMAGE_SIZE``."""
    palette = DARK if screen.dark else LIGHT
    image = Image.new("RGB", IMAGE_SIZE, palette["bg"])
    canvas = Canvas(image, palette)
    on_wallpaper = screen.key == "home"
    for widget in screen.widgets:
        _paint(canvas, widget, on_wallpaper)
    return image


def encode_png(image: Image.Image) -> bytes:
    """PNG bytes of an RGB image, written directly: every row with filter type 0 and one
    deflate stream at ``PNG_COMPRESS_LEVEL``.

    Pillow's encoder chooses a filter per row by trying all five, which on flat UI frames
    costs more than the compression itself; a fixed filter halves the encode time and keeps
    the bytes a pure function of the pixels (and of zlib, as with any encoder).
    """
    pixels = np.asarray(image.convert("RGB") if image.mode != "RGB" else image)
    height, width, _ = pixels.shape
    scanlines = np.zeros((height, width * 3 + 1), dtype=np.uint8)
    scanlines[:, 1:] = pixels.reshape(height, width * 3)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    data = zlib.compress(scanlines.tobytes(), PNG_COMPRESS_LEVEL)
    return PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
