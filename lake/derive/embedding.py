"""A screenshot's embedding: one fixed-length vector per screen, for "screens like this one".

The vector is the screen below the status bar reduced to a grid of grey levels
(`EMBEDDING_GRID`, box-filtered: every pixel counts), its mean taken away and scaled to unit
length. It needs no model, so nothing is downloaded and every process computes the same
value (about 5 ms a screen on one core, mostly the PNG decode). It was chosen by measuring on
the simulated phone (`bench/bench_anchor.py`, the phone's ground-truth screen id): two
screenshots of one screen state below the status bar are at distance 0, a JPEG re-encoding
(quality 85) moves a screen by at most about 0.04, the closest distinct states (one
character typed into a field) are under 0.001 apart, 99% of distinct pairs more than 0.1,
and the median pair 1.4. Exact on lossless captures, then; on lossy ones a tolerance that
absorbs the codec also merges states that differ by a character. A PP-OCRv4 feature map or
OCR words would cost 100-1000 times more per screen.

Distances are Euclidean between unit vectors (0 for the same screen, at most 2), the unit
`elake similar`, `--dedupe-similar` and the embedding anchor keys share.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence

import numpy as np
from PIL import Image

from episodelake.lake.derive.anchor import STATUS_BAR_FRACTION, connected_keys
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.schema import EMBEDDING_DIM

#: (columns, rows) of the grey grid: a phone's 9:20 screen in cells about 34 px square.
EMBEDDING_GRID = (16, 32)
#: Bump when the vector changes meaning: `elake enrich --what embed` then recomputes it.
EMBEDDING_VERSION = 1

if EMBEDDING_GRID[0] * EMBEDDING_GRID[1] != EMBEDDING_DIM:
    raise AssertionError(f"EMBEDDING_GRID {EMBEDDING_GRID} does not give schema.EMBEDDING_DIM {EMBEDDING_DIM}")


def screen_embedding(image: bytes | Image.Image, status_bar_px: int | None = None) -> np.ndarray:
    """The unit-length float32 vector of a screenshot (all zeros for a screen of one colour,
    which has no layout to compare)."""
    picture = Image.open(io.BytesIO(image)) if isinstance(image, bytes | bytearray | memoryview) else image
    width, height = picture.size
    top = round(height * STATUS_BAR_FRACTION) if status_bar_px is None else status_bar_px
    if not 0 <= top < height:
        raise InvalidInput(f"status_bar_px={top} leaves nothing of a {width}x{height} image")
    grey = picture.crop((0, top, width, height)).convert("L").resize(EMBEDDING_GRID, Image.Resampling.BOX)
    vector = np.asarray(grey, dtype=np.float32).ravel() / 255.0
    vector -= vector.mean()
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm > 1e-6 else np.zeros_like(vector)).astype(np.float32)


def embedding_anchor_keys(embeddings: Sequence[np.ndarray], threshold: float) -> list[str]:
    """Anchor keys for all steps of one group from their embeddings, independent of order:
    steps within `threshold` (Euclidean) are linked, and each connected set is one key, named
    by the hash of its first member's vector in (byte) order. The mode for devices with no
    UI tree; `threshold` 0 keys identical screens together and nothing else."""
    if threshold < 0:
        raise InvalidInput(f"threshold must be at least 0, not {threshold}")
    matrix = np.asarray(embeddings, dtype=np.float32).reshape(len(embeddings), EMBEDDING_DIM)
    exact = [v.tobytes() for v in matrix]
    # |a - b|^2 = 2 - 2 a.b for unit vectors; equal vectors link whatever rounding says
    near = (2.0 - 2.0 * (matrix @ matrix.T)) <= threshold * threshold
    seen: dict[bytes, int] = {}
    same = [(i, seen.setdefault(raw, i)) for i, raw in enumerate(exact)]
    links = [*((int(i), int(j)) for i, j in zip(*np.nonzero(np.tril(near, -1)), strict=True)), *same]
    return connected_keys(exact, links, lambda raw: f"em:{hashlib.sha256(raw).hexdigest()[:16]}")
