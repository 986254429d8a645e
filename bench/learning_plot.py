"""A metric per iteration over seeds (held-out success; or the training reward), one band
per arm, drawn to a PNG.

`bench_learning.py --seeds N --keep DIR` (or `--summarise DIR`) draws DIR/learning.png with
it. Each arm (an algorithm, with its `--set` changes) is its mean curve and the 95% interval
around it (`learning_stats.per_iteration`), with every seed's own curve drawn thin
underneath, so a single run's collapse stays visible inside a calm mean. Pillow only: the benchmark machine has no plotting library.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from episodelake.trainer import learning_stats as stats

SIZE = (960, 540)
MARGIN = (70, 40, 30, 60)  # left, top, right, bottom
PALETTE = ((31, 119, 180), (214, 96, 39), (44, 160, 44), (148, 103, 189), (90, 90, 90))


def plot(curves: dict[str, list[list[float]]], path: Path, *, title: str, target: float | None = 0.6,
         top_value: float = 1.0, percent: bool = True) -> None:
    """`top_value` is the y axis's top (rates: 1.0, drawn as 0-100%); `target` a line across."""
    image = Image.new("RGB", SIZE, "white")
    draw = ImageDraw.Draw(image, "RGBA")
    font = ImageFont.load_default(size=14)
    left, top, right, bottom = MARGIN
    width, height = SIZE[0] - left - right, SIZE[1] - top - bottom
    iterations = max(len(c) for runs in curves.values() for c in runs)

    def xy(i: int, value: float) -> tuple[float, float]:
        value = min(top_value, max(0.0, value))  # an interval may reach past the axis
        return left + width * i / max(iterations - 1, 1), top + height * (1.0 - value / top_value)

    for k in range(6):
        value = top_value * k / 5
        y = xy(0, value)[1]
        draw.line([(left, y), (left + width, y)], fill=(230, 230, 230))
        draw.text((left - 8, y), f"{100 * value:.0f}%" if percent else f"{value:.2g}", fill="black",
                  font=font, anchor="rm")
    for tick in range(0, iterations, 10):
        x = xy(tick, 0)[0]
        draw.text((x, top + height + 8), str(tick + 1), fill="black", font=font, anchor="mt")
    if target is not None:
        y = xy(0, target)[1]
        draw.line([(left, y), (left + width, y)], fill=(0, 0, 0, 90), width=1)
    draw.rectangle([left, top, left + width, top + height], outline="black")
    for k, runs in enumerate(curves.values()):
        colour = PALETTE[k % len(PALETTE)]
        bands = stats.per_iteration(runs)
        upper = [xy(i, b.high if b.high is not None else b.mean) for i, b in enumerate(bands)]
        lower = [xy(i, b.low if b.low is not None else b.mean) for i, b in enumerate(bands)]
        draw.polygon(upper + lower[::-1], fill=(*colour, 45))
        for curve in runs:
            draw.line([xy(i, v) for i, v in enumerate(curve)], fill=(*colour, 70), width=1)
        draw.line([xy(i, b.mean) for i, b in enumerate(bands)], fill=colour, width=3)
    draw.text((left + width / 2, top + height + 30), "iteration", fill="black", font=font, anchor="mt")
    draw.text((left, top - 24), title, fill="black", font=font)
    for k, label in enumerate(curves):  # top left: the curves start low
        y = top + 16 + 20 * k
        draw.line([(left + 12, y), (left + 36, y)], fill=PALETTE[k % len(PALETTE)], width=3)
        draw.text((left + 42, y), f"{label} (n={len(curves[label])})", fill="black", font=font, anchor="lm")
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
