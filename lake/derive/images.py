"""Screenshots on the way in: accept what collectors have, store exactly the bytes received.

Encoded PNG/JPEG/WebP bytes are stored unchanged (never decoded and re-encoded); PIL images
and numpy arrays are encoded once as PNG. Two levels of checking:
- `structure` (always): a PNG's chunks are walked and every CRC checked up to IEND (which
  catches truncation and accidental corruption that decoders let through), its header read
  and checked (size, bit depth, colour type) and its compressed stream's header checked;
  JPEG needs its end marker, WebP its RIFF length. The pixel limit is applied from the
  header, before any decoder sees the data. About 1 ms per 1080x2400 step. What it cannot
  catch: compressed pixel data that was altered with its chunk CRCs recomputed (a buggy
  encoder or deliberate tampering), or damage inside a JPEG/WebP body. Proving that
  takes inflating the pixel stream (its Adler-32 is over the inflated bytes), which costs
  20-27 ms per 1080x2400 PNG, close to the full decode below, so `structure` does not.
- `decode` (default, on top): the image is fully decoded once; that proves the pixel data
  whole and gives the perceptual hash that anchor keys are built from. Decoding a 1080x2400
  PNG costs ~40 ms. Without it there is no perceptual hash, and anchor keys come from UI
  trees only.
Anything that is not a whole image is an `InvalidInput` naming what was wrong: the lake never
stores a placeholder, and no PIL error reaches the caller.
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

from episodelake.lake.derive.anchor import phash64
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.images import sniff_format

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
        _check_size(image.shape[1], image.shape[0])
        try:
            image = Image.fromarray(image)
        except Exception as exc:  # PIL's errors on odd arrays are of many types
            raise InvalidInput(f"image: this numpy array cannot be made an image ({exc})") from None
    if isinstance(image, Image.Image):
        _check_size(image.width, image.height)
        buf = io.BytesIO()
        try:
            image.save(buf, format="PNG", compress_level=1)
        except Exception as exc:  # e.g. a mode PNG cannot hold (CMYK), an unloaded lazy file
            raise InvalidInput(f"image: this {image.mode} PIL image cannot be stored as PNG ({exc})") from None
        return buf.getvalue(), True
    raise InvalidInput(
        f"image: expected PNG/JPEG/WebP bytes, base64 text, a PIL image or a numpy array, not {type(image).__name__}"
    )


def _check_size(width: int, height: int) -> None:
    if width < 1 or height < 1:
        raise InvalidInput(f"image: {width}x{height} has no pixels")
    if width * height > MAX_PIXELS:
        raise InvalidInput(f"image: {width}x{height} is over the {MAX_PIXELS:,}-pixel limit")


#: PNG colour type -> the bit depths it allows (PNG specification, table 11.1).
_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}


def _check_png(data: bytes) -> tuple[int, int]:
    """Walk the chunks (CRCs, IHDR first, IDAT present, IEND last); returns (width, height)."""
    pos = 8
    size = None
    stream_head = b""
    while True:
        if pos + 12 > len(data):
            raise InvalidInput("image: the PNG data is truncated (no IEND chunk)")
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        end = pos + 12 + length
        if end > len(data):
            raise InvalidInput(f"image: the PNG data is truncated inside a {kind!r} chunk")
        (crc,) = struct.unpack(">I", data[end - 4:end])
        if zlib.crc32(data[pos + 4:end - 4]) != crc:
            raise InvalidInput(f"image: the PNG data is damaged (bad CRC in a {kind!r} chunk)")
        body = data[pos + 8:end - 4]
        if size is None:
            size = _png_header(kind, body)
        elif kind == b"IDAT" and len(stream_head) < 2:
            stream_head += body[:2 - len(stream_head)]
        elif kind == b"IEND":
            break
        pos = end
    if len(stream_head) < 2:
        raise InvalidInput("image: the PNG has no pixel data (no IDAT chunk)")
    cmf, flg = stream_head
    if cmf & 0x0F != 8 or cmf >> 4 > 7 or flg & 0x20 or (cmf << 8 | flg) % 31:
        raise InvalidInput("image: the PNG data is damaged (its pixel stream is not a zlib stream)")
    return size


def _png_header(kind: bytes, body: bytes) -> tuple[int, int]:
    if kind != b"IHDR" or len(body) != 13:
        raise InvalidInput("image: the PNG header is damaged (the first chunk is not a 13-byte IHDR)")
    width, height, depth, colour, compression, filtering, interlace = struct.unpack(">IIBBBBB", body)
    if not (0 < width < 2**31 and 0 < height < 2**31) or depth not in _PNG_DEPTHS.get(colour, ()) \
            or compression or filtering or interlace > 1:
        raise InvalidInput(f"image: the PNG header is damaged ({width}x{height}, bit depth {depth}, "
                           f"colour type {colour}, methods {compression}/{filtering}/{interlace})")
    _check_size(width, height)
    return width, height


def _check_structure(data: bytes, fmt: str) -> tuple[int, int] | None:
    """(width, height) where the structure check reads them (PNG), else None."""
    if fmt == "png":
        return _check_png(data)
    if fmt == "jpeg" and not data.rstrip(b"\x00").endswith(b"\xff\xd9"):
        raise InvalidInput("image: the JPEG data is truncated (no end-of-image marker)")
    if fmt == "webp" and struct.unpack("<I", data[4:8])[0] + 8 > len(data):
        raise InvalidInput("image: the WebP data is truncated (shorter than its RIFF header says)")
    return None


def _open(data: bytes, fmt: str) -> Image.Image:
    """PIL's lazy open (header only), with its size checked before anything is decoded."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            opened = Image.open(io.BytesIO(data))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise InvalidInput(f"image: over the {MAX_PIXELS:,}-pixel limit") from None
    except Exception as exc:  # hostile headers raise OSError, SyntaxError, struct.error, ...
        raise InvalidInput(f"image: the {fmt.upper()} header is damaged ({type(exc).__name__}: {exc})") from None
    _check_size(*opened.size)
    return opened


def prepare_image(image: object, *, decode: bool = True) -> StoredImage:
    """Validate and describe a screenshot; the bytes returned are the bytes to store.

    `decode=False` skips the decode and leaves `phash` None (see the module docstring).
    """
    data, _ = _to_bytes(image)
    fmt = sniff_format(data)
    if fmt is None:
        raise InvalidInput("image: the bytes are not a PNG, JPEG or WebP image")
    size = _check_structure(data, fmt)
    if not decode:
        width, height = size or _open(data, fmt).size
        return StoredImage(data, fmt, width, height, hashlib.sha256(data).hexdigest(), None)
    opened = _open(data, fmt)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            opened.load()
            phash = phash64(opened)
    except Exception as exc:  # decoders report damage as OSError, SyntaxError, ValueError, ...
        raise InvalidInput(f"image: the {fmt.upper()} data is damaged or truncated ({type(exc).__name__}: {exc})") from None
    width, height = opened.size
    return StoredImage(data, fmt, width, height, hashlib.sha256(data).hexdigest(), phash)
