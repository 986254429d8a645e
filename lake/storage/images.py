"""Image formats the lake stores as received."""

from __future__ import annotations

FORMATS = ("png", "jpeg", "webp")
MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}


def sniff_format(data: bytes) -> str | None:
    """The format of encoded image bytes from their magic number, or None if unknown."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None
