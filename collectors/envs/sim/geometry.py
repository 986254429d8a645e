"""Screen geometry of the simulated phone, in logical (device) pixels.

Layout, hit testing and the accessibility tree all work in the logical 1080x2400 space of
a common Android phone, because that is what agents' 0-999 coordinates are projected onto
and what a uiautomator dump reports. Only the renderer scales down (by ``RENDER_SCALE``) to
keep frames small and fast to encode.
"""

from __future__ import annotations

from typing import NamedTuple

WIDTH = 1080
HEIGHT = 2400
RENDER_SCALE = 0.5
IMAGE_SIZE = (round(WIDTH * RENDER_SCALE), round(HEIGHT * RENDER_SCALE))

STATUS_BAR_H = 96
APP_BAR_H = 168
NAV_BAR_H = 144
KEYBOARD_H = 840

CONTENT_TOP = STATUS_BAR_H + APP_BAR_H
NAV_TOP = HEIGHT - NAV_BAR_H
KEYBOARD_TOP = NAV_TOP - KEYBOARD_H

#: Largest value of an agent coordinate; the environment maps 0..COORD_MAX onto 0..WIDTH.
COORD_MAX = 999


class Rect(NamedTuple):
    """An axis-aligned box; ``right`` and ``bottom`` are exclusive. A named tuple because
    layouts make tens of thousands of them per second."""

    left: int
    top: int
    right: int
    bottom: int

    @property
    def width(self) -> int:
        return self.right - self.left

    @property
    def height(self) -> int:
        return self.bottom - self.top

    @property
    def center(self) -> tuple[int, int]:
        return (self.left + self.right) // 2, (self.top + self.bottom) // 2

    def contains(self, x: float, y: float) -> bool:
        return self.left <= x < self.right and self.top <= y < self.bottom

    def intersect(self, other: Rect) -> Rect | None:
        box = Rect(max(self.left, other.left), max(self.top, other.top),
                   min(self.right, other.right), min(self.bottom, other.bottom))
        return box if box.width > 0 and box.height > 0 else None

    def shifted(self, dy: int) -> Rect:
        return Rect(self.left, self.top + dy, self.right, self.bottom + dy)

    def inset(self, dx: int, dy: int | None = None) -> Rect:
        dy = dx if dy is None else dy
        return Rect(self.left + dx, self.top + dy, self.right - dx, self.bottom - dy)



def to_pixels(x: float, y: float) -> tuple[float, float]:
    """Project an agent coordinate (0..999 on each axis) onto logical pixels."""
    return x / COORD_MAX * WIDTH, y / COORD_MAX * HEIGHT


def to_coordinate(x: float, y: float) -> list[int]:
    """Project logical pixels onto the agents' integer 0..999 scale."""
    return [
        min(COORD_MAX, max(0, round(x / WIDTH * COORD_MAX))),
        min(COORD_MAX, max(0, round(y / HEIGHT * COORD_MAX))),
    ]
