"""Deterministic test data: real PNG screenshots drawn with Pillow, MAI-UI responses."""

from __future__ import annotations

import io
import json

from PIL import Image, ImageDraw


def screenshot(seed: int = 0, size: tuple[int, int] = (108, 240), clock: str = "12:00",
               fmt: str = "PNG") -> bytes:
    """A phone-like screen: a status bar with a clock and blocks whose layout depends on seed."""
    img = Image.new("RGB", size, (245, 245, 245))
    d = ImageDraw.Draw(img)
    w, h = size
    d.rectangle((0, 0, w, int(h * 0.04)), fill=(30, 30, 30))
    d.text((2, 0), clock, fill=(255, 255, 255))
    rng = (seed * 2654435761) & 0xFFFFFFFF
    for i in range(4):
        rng = (rng * 1103515245 + 12345) & 0x7FFFFFFF
        top = int(h * 0.1) + i * h // 5
        left = rng % (w // 2)
        colour = ((rng >> 3) % 256, (rng >> 7) % 256, (rng >> 11) % 256)
        d.rectangle((left, top, left + w // 3, top + h // 8), fill=colour)
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


def response(action: str = "click", thinking: str = "tap the button", **arguments) -> str:
    args = {"action": action, **arguments}
    if action in ("click", "long_press") and "coordinate" not in args:
        args["coordinate"] = [500, 500]
    call = json.dumps({"name": "mobile_use", "arguments": args})
    return f"<thinking>{thinking}</thinking>\n<tool_call>\n{call}\n</tool_call>"
