"""Realistic 1080x2400 phone screenshots for benchmarks (drawn once, deterministic)."""

from __future__ import annotations

import io
import random

from PIL import Image, ImageDraw, ImageFont


def phone_screen(seed: int, size: tuple[int, int] = (1080, 2400)) -> bytes:
    """A settings-like list screen with text, icons and a photo-like gradient banner."""
    rng = random.Random(seed)
    w, h = size
    img = Image.new("RGB", size, (250, 250, 250))
    d = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=44)
    d.rectangle((0, 0, w, 96), fill=(20, 20, 20))
    d.text((40, 20), f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}", fill="white", font=font)
    banner = Image.linear_gradient("L").resize((w, 420)).convert("RGB")
    tint = Image.new("RGB", (w, 420), (rng.randint(0, 255), rng.randint(0, 255), rng.randint(0, 255)))
    img.paste(Image.blend(banner, tint, 0.5), (0, 120))
    for i in range(12):
        top = 580 + i * 150
        d.rounded_rectangle((40, top, 140, top + 100), 20,
                            fill=(rng.randint(0, 255), rng.randint(0, 255), rng.randint(0, 255)))
        d.text((180, top + 25), f"Item {rng.randint(100, 999)} settings entry", fill=(30, 30, 30), font=font)
        d.line((40, top + 130, w - 40, top + 130), fill=(220, 220, 220), width=2)
    for _ in range(400):  # photo-like noise so the PNG is not trivially compressible
        x, y = rng.randrange(w), rng.randrange(120, 540)
        d.point((x, y), fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()
