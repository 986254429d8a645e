"""Screenshots on the way in: accept what collectors have, store exactly the bytes received.

Encoded PNG/JPEG/WebP bytes are stored unchanged (never decoded and re-encoded); PIL images
and numpy arrays are encoded once as PNG. Two levels of checking:
- `structure` (always): PNG chunks are walked and every CRC checked up to IEND (which
  catches truncation and corruption that decoders let through), JPEG needs its end marker,
  WebP its RIFF length. About 1 ms per 1080x2400 step.
- `decode` (default, on top): the image is fully decoded once; that proves the pixel data
  whole and gives the perceptual hash that anchor keys are built from. Decoding a 1080x2400
  PNG costs ~40 ms. Without it there is no perceptual hash, and anchor keys come from UI
  trees only.
Anything that is not a whole image is an `InvalidInput` naming what was wrong: the lake never
stores a placeholder.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import struct
import warnings
import zlib
from dataclasses import dataclass

import numpy as np
from PIL import Image

from episodelake.collectors.anchor import phash64
from episodelake.lake.errors import InvalidInput
from episodelake.lake.images import sniff_format

MAX_PIXELS = 50_000_000


@dataclass(frozen=True)
class StoredImage:
    data: bytes
    format: str
    width: int
    height: int
    sha256: str
    phash: int | None


def _to_bytes(image: object) -> tuple[bytes, bool]:
    """(encoded bytes, whether we encoded them) from any accepted input."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image), False
    if isinstance(image, str):
        text = image.strip()
        if text.startswith("data:"):
            text = text.split(",", 1)[-1]
        try:
            return base64.b64decode(text, validate=True), False
        except (binascii.Error, ValueError) as exc:
            raise InvalidInput(f"image: corrupt base64 text ({exc})") from None
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (3, 4)):
            raise InvalidInput(
                f"image: numpy arrays must be uint8 HxW, HxWx3 or HxWx4 (got {image.dtype} {image.shape})"
            )
        image = Image.fromarray(image)
    if isinstance(image, Image.Image):
        if image.width * image.height > MAX_PIXELS:
            raise InvalidInput(f"image: {image.width}x{image.height} is over the {MAX_PIXELS:,}-pixel limit")
        buf = io.BytesIO()
        image.save(buf, format="PNG", compress_level=1)
        return buf.getvalue(), True
    raise InvalidInput(
        f"image: expected PNG/JPEG/WebP bytes, base64 text, a PIL image or a numpy array, not {type(image).__name__}"
    )


def _check_png_chunks(data: bytes) -> None:
    pos = 8
    while True:
        if pos + 12 > len(data):
            raise InvalidInput("image: the PNG data is truncated (no IEND chunk)")
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        end = pos + 12 + length
        if end > len(data):
            raise InvalidInput(f"image: the PNG data is truncated inside a {data[pos + 4:pos + 8]!r} chunk")
        (crc,) = struct.unpack(">I", data[end - 4:end])
        if zlib.crc32(data[pos + 4:end - 4]) != crc:
            raise InvalidInput(f"image: the PNG data is damaged (bad CRC in a {data[pos + 4:pos + 8]!r} chunk)")
        if data[pos + 4:pos + 8] == b"IEND":
            return
        pos = end


def _check_structure(data: bytes, fmt: str) -> None:
    if fmt == "png":
        _check_png_chunks(data)
    elif fmt == "jpeg" and not data.rstrip(b"\x00").endswith(b"\xff\xd9"):
        raise InvalidInput("image: the JPEG data is truncated (no end-of-image marker)")
    elif fmt == "webp" and struct.unpack("<I", data[4:8])[0] + 8 > len(data):
        raise InvalidInput("image: the WebP data is truncated (shorter than its RIFF header says)")


def prepare_image(image: object, *, decode: bool = True) -> StoredImage:
    """Validate and describe a screenshot; the bytes returned are the bytes to store.

    `decode=False` skips the decode and leaves `phash` None (see the module docstring).
    """
    data, _ = _to_bytes(image)
    fmt = sniff_format(data)
    if fmt is None:
        raise InvalidInput("image: the bytes are not a PNG, JPEG or WebP image")
    _check_structure(data, fmt)
    if not decode:
        try:
            width, height = Image.open(io.BytesIO(data)).size
        except (OSError, SyntaxError, ValueError) as exc:
            raise InvalidInput(f"image: the {fmt.upper()} header is damaged ({exc})") from None
        if width * height > MAX_PIXELS:
            raise InvalidInput(f"image: {width}x{height} is over the {MAX_PIXELS:,}-pixel limit")
        return StoredImage(data, fmt, width, height, hashlib.sha256(data).hexdigest(), None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            opened = Image.open(io.BytesIO(data))
            width, height = opened.size
            if width * height > MAX_PIXELS:
                raise InvalidInput(f"image: {width}x{height} is over the {MAX_PIXELS:,}-pixel limit")
            opened.load()
    except InvalidInput:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise InvalidInput(f"image: over the {MAX_PIXELS:,}-pixel limit") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise InvalidInput(f"image: the {fmt.upper()} data is damaged or truncated ({exc})") from None
    return StoredImage(
        data=data,
        format=fmt,
        width=width,
        height=height,
        sha256=hashlib.sha256(data).hexdigest(),
        phash=phash64(opened),
    )
