"""Screenshots for an export: read once per episode, written once per content, never re-encoded.

Images are copied byte for byte as the lake stores them and named by the sha256 of those
bytes (`images/ab/abcdef....png`), so a screenshot shared by many samples (the history of
later steps) is one file. Only a `max_pixels` limit re-encodes: the image is downscaled,
saved in its own format, and then named by the sha256 of the new bytes.
"""

from __future__ import annotations

import hashlib
import io
import math
from pathlib import Path

import lance
from PIL import Image

from episodelake.lake.errors import LakeCorrupt
from episodelake.lake.export.selection import EpisodeSteps
from episodelake.lake.images import MEDIA_TYPES
from episodelake.lake.lake import Lake

IMAGE_DIR = "images"
_SUFFIX = {"png": "png", "jpeg": "jpg", "webp": "webp"}
_PIL_FORMAT = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP"}


def media_type(fmt: str) -> str:
    return MEDIA_TYPES.get(fmt, "application/octet-stream")


def downscale(data: bytes, fmt: str, max_pixels: int) -> bytes:
    """`data` resized to at most `max_pixels` pixels, aspect kept; unchanged if already small."""
    with Image.open(io.BytesIO(data)) as img:
        w, h = img.size
        if w * h <= max_pixels:
            return data
        scale = math.sqrt(max_pixels / (w * h))
        size = (max(1, int(w * scale)), max(1, int(h * scale)))
        out = io.BytesIO()
        resized = img.resize(size, Image.Resampling.LANCZOS)
        resized.save(out, format=_PIL_FORMAT.get(fmt, "PNG"), **({"quality": 95} if fmt == "jpeg" else {}))
        return out.getvalue()


def load_images(steps: lance.LanceDataset, episode: EpisodeSteps,
                max_pixels: int | None) -> dict[str, tuple[bytes, str]]:
    """The episode's screenshots as exported (downscaled if asked) by lake sha256, with their
    format; `steps` must be the version the episode's row ids were read at."""
    wanted = [(rid, row) for rid, row in zip(episode.rowids, episode.steps, strict=True)
              if row["image_sha256"]]
    blobs = steps.take_blobs("image", ids=[rid for rid, _ in wanted]) if wanted else []
    loaded = {}
    for (_, row), blob in zip(wanted, blobs, strict=True):
        fmt = row["image_format"] or "png"
        if blob is None:
            raise LakeCorrupt(f"episode {episode.episode_id} step {row['step']}: the row names "
                              f"image {row['image_sha256']} but holds no image bytes")
        with blob:
            data = blob.read()
        if max_pixels is not None:
            data = downscale(data, fmt, max_pixels)
        loaded[row["image_sha256"]] = (data, fmt)
    return loaded


class ImageStore:
    """Serves the current episode's screenshots by sha256 and writes image files once.

    `begin(episode)` forgets the previous episode; its blobs are read lazily, on the first
    request, so formats that never ask for bytes (or files already written) cost no read,
    unless they were read ahead elsewhere (`begin(episode, loaded)`, see `load_images`).
    """

    def __init__(self, source: Lake, out: Path, max_pixels: int | None):
        self._dataset = source.dataset("steps")
        self.out = out
        self.max_pixels = max_pixels
        self._episode: EpisodeSteps | None = None
        self._loaded: dict[str, tuple[bytes, str]] | None = None
        self._files: dict[str, str] = {}  # lake sha256 -> relative path written
        self.files_written = 0
        self.bytes_written = 0

    def begin(self, episode: EpisodeSteps,
              loaded: dict[str, tuple[bytes, str]] | None = None) -> None:
        self._episode = episode
        self._loaded = loaded

    def data(self, sha: str) -> tuple[bytes, str]:
        """The image's bytes as exported (downscaled if asked) and its format."""
        episode = self._episode
        if episode is None:
            raise RuntimeError("ImageStore.data: call begin(episode) first")
        if self._loaded is None:
            self._loaded = load_images(self._dataset, episode, self.max_pixels)
        try:
            return self._loaded[sha]
        except KeyError:
            raise LakeCorrupt(f"episode {episode.episode_id}: no image with sha256 {sha} "
                              "among its steps; run `elake recover`") from None

    def file(self, sha: str) -> str:
        """The image's path relative to the export folder, writing the file the first time."""
        rel = self._files.get(sha)
        if rel is None:
            data, fmt = self.data(sha)
            name = sha if self.max_pixels is None else hashlib.sha256(data).hexdigest()
            rel = f"{IMAGE_DIR}/{name[:2]}/{name}.{_SUFFIX.get(fmt, fmt)}"
            path = self.out / rel
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                self.files_written += 1
                self.bytes_written += len(data)
            self._files[sha] = rel
        return rel
