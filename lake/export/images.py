"""Screenshots for an export: read once per episode, written once per content, never re-encoded
unless asked.

Images are copied byte for byte as the lake stores them and named by the sha256 of those
bytes (`images/ab/abcdef....png`), so a screenshot shared by many samples (the history of
later steps) is one file. Only a `max_pixels` limit or a redaction re-encodes: the image is
decoded once, downscaled, masked (`episodelake.lake.curation.redact`), saved in its own format, and
then named by the sha256 of the new bytes.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import lance
from PIL import Image

from episodelake.lake.curation.redact import Redactor, Region, mask_pixels
from episodelake.lake.export.selection import EpisodeSteps
from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import Conflict, LakeCorrupt
from episodelake.lake.storage.images import MEDIA_TYPES
from episodelake.lake.storage.lake import Lake

IMAGE_DIR = "images"
_SUFFIX = {"png": "png", "jpeg": "jpg", "webp": "webp"}
_PIL_FORMAT = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP"}
#: What a redacting export reads with each screenshot: the text found on it.
TEXT_COLUMNS = schema.pick("steps", ["ocr_boxes", "ocr_version"])


def media_type(fmt: str) -> str:
    return MEDIA_TYPES.get(fmt, "application/octet-stream")


@dataclass(frozen=True)
class ExportImage:
    """A screenshot as exported: its bytes, its format, and the regions masked in it."""

    data: bytes
    fmt: str
    regions: tuple[Region, ...] = field(default=())


def export_image(data: bytes, fmt: str, max_pixels: int | None, regions: list[Region] | None = None) -> bytes:
    """`data` resized to at most `max_pixels` pixels (aspect kept) and with `regions` masked,
    decoded and encoded once; the stored bytes themselves when neither changes anything."""
    with Image.open(io.BytesIO(data)) as img:
        w, h = img.size
        shrink = max_pixels is not None and w * h > max_pixels
        if not shrink and not regions:
            return data
        out: Image.Image = img
        if shrink:
            assert max_pixels is not None
            scale = math.sqrt(max_pixels / (w * h))
            out = img.resize((max(1, int(w * scale)), max(1, int(h * scale))), Image.Resampling.LANCZOS)
        if regions:
            out = out.convert("RGBA" if out.mode in ("RGBA", "LA", "PA") or "transparency" in out.info else "RGB")
            mask_pixels(out, regions)
        buf = io.BytesIO()
        out.save(buf, format=_PIL_FORMAT.get(fmt, "PNG"), **({"quality": 95} if fmt == "jpeg" else {}))
        return buf.getvalue()


def load_images(steps: lance.LanceDataset, episode: EpisodeSteps, max_pixels: int | None,
                redactor: Redactor | None = None) -> dict[str, ExportImage]:
    """The episode's screenshots as exported (downscaled and redacted if asked) by lake
    sha256; `steps` must be the version the episode's row ids were read at. When redacting,
    a screenshot with no text to check is left out (the export refused or skipped its
    samples before; see `job.unredactable`), so it can never be written unmasked."""
    wanted = [(rid, row) for rid, row in zip(episode.rowids, episode.steps, strict=True)
              if row["image_sha256"] and (redactor is None or row["ocr_version"] is not None)]
    ids = [rid for rid, _ in wanted]
    blobs = steps.take_blobs("image", ids=ids) if wanted else []
    texts = steps.take(ids, columns=TEXT_COLUMNS).to_pylist() if wanted and redactor else [{}] * len(wanted)
    loaded = {}
    for (_, row), blob, text in zip(wanted, blobs, texts, strict=True):
        fmt = row["image_format"] or "png"
        if blob is None:
            raise LakeCorrupt(f"episode {episode.episode_id} step {row['step']}: the row names "
                              f"image {row['image_sha256']} but holds no image bytes")
        with blob:
            data = blob.read()
        regions = redactor.find(text["ocr_boxes"] or []) if redactor else []
        loaded[row["image_sha256"]] = ExportImage(export_image(data, fmt, max_pixels, regions), fmt, tuple(regions))
    return loaded


class ImageStore:
    """Serves the current episode's screenshots by sha256 and writes image files once.

    `begin(episode)` forgets the previous episode; its blobs are read lazily, on the first
    request, so formats that never ask for bytes (or files already written) cost no read,
    unless they were read ahead elsewhere (`begin(episode, loaded)`, see `load_images`).
    `masked` keeps, for the manifest, each image handed out with masked regions.
    """

    def __init__(self, source: Lake, out: Path, max_pixels: int | None, redactor: Redactor | None = None):
        self._dataset = source.dataset("steps")
        self.out = out
        self.max_pixels = max_pixels
        self.redactor = redactor
        self._episode: EpisodeSteps | None = None
        self._loaded: dict[str, ExportImage] | None = None
        self._files: dict[str, str] = {}  # lake sha256 -> relative path written
        self.masked: dict[str, ExportImage] = {}  # lake sha256 -> the image with regions masked
        self.files_written = 0
        self.bytes_written = 0

    def begin(self, episode: EpisodeSteps, loaded: dict[str, ExportImage] | None = None) -> None:
        self._episode = episode
        self._loaded = loaded

    def image(self, sha: str) -> ExportImage:
        episode = self._episode
        if episode is None:
            raise RuntimeError("ImageStore.image: call begin(episode) first")
        if self._loaded is None:
            self._loaded = load_images(self._dataset, episode, self.max_pixels, self.redactor)
        try:
            image = self._loaded[sha]
        except KeyError:
            if self.redactor is not None:
                raise Conflict(f"episode {episode.episode_id}: screenshot {sha} has no OCR text to "
                               "redact by; run `elake enrich --what ocr`") from None
            raise LakeCorrupt(f"episode {episode.episode_id}: no image with sha256 {sha} "
                              "among its steps; run `elake recover`") from None
        if image.regions:
            self.masked[sha] = image
        return image

    def data(self, sha: str) -> tuple[bytes, str]:
        """The image's bytes as exported (downscaled and redacted if asked) and its format."""
        image = self.image(sha)
        return image.data, image.fmt

    def file(self, sha: str) -> str:
        """The image's path relative to the export folder, writing the file the first time."""
        rel = self._files.get(sha)
        if rel is None:
            data, fmt = self.data(sha)
            changed = self.max_pixels is not None or self.redactor is not None
            name = hashlib.sha256(data).hexdigest() if changed else sha
            rel = f"{IMAGE_DIR}/{name[:2]}/{name}.{_SUFFIX.get(fmt, fmt)}"
            path = self.out / rel
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                self.files_written += 1
                self.bytes_written += len(data)
            self._files[sha] = rel
        return rel

    def redaction(self, exported: set[str]) -> dict:
        """The manifest's record of the masks in the images `exported` (lake sha256s): per
        image, the sha256 of the bytes written and each region's rule and box."""
        shown = sorted(exported & set(self.masked))
        counts = Counter(r.rule for sha in shown for r in self.masked[sha].regions)
        images = {sha: {"sha256": hashlib.sha256(self.masked[sha].data).hexdigest(),
                        "regions": [r.recorded() for r in self.masked[sha].regions]} for sha in shown}
        return {"images": images, "regions": dict(sorted(counts.items()))}
