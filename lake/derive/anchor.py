"""Anchor keys: which steps of an episode group show "the same state", for GiGPO's step groups.

An exact hash of a screenshot never matches across episodes once the status-bar clock has
moved, so every anchor group would have one member. The key here is a perceptual hash of
the screen below the status bar (:func:`phash64`), clustered within a group by Hamming
distance (:class:`AnchorKeyer`); when the device gives an accessibility tree, the hash of the
tree without the status bar (:func:`ui_tree_hash`) is an exact alternative.

Keys are only meaningful inside one group: group steps by (group_id, anchor_key). The
recorder keys steps as they are written, clustering per process; a group recorded by one
process (as the rollout runner does) is keyed consistently. The ClawGUI importer and drop-in
functions key steps the same way, within the group ids they derive for ClawGUI episodes.
"""

from __future__ import annotations

import hashlib
import io
import threading
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Literal, TypeVar

import numpy as np
from PIL import Image

from episodelake.lake.storage.errors import InvalidInput

#: What `connected_keys` names a connected set after (its smallest member).
Ordered = TypeVar("Ordered", int, bytes)

#: Height of the status bar as a share of the screen height when the caller gives none
#: (a 1080x2400 phone's status bar is about 90-100 px high).
STATUS_BAR_FRACTION = 0.04

#: Default clustering threshold in bits (of 64), chosen with ``bench/bench_anchor.py``: on
#: lossless captures (the simulator, adb PNGs) the same screen hashes identically once the
#: status bar is cropped, while distinct screens often differ by only 2-4 bits (a typed word,
#: a small icon), so any tolerance merges them. For lossy (JPEG) sources use 2: re-encoding
#: moves up to 2 bits.
DEFAULT_THRESHOLD = 0

#: Accessibility nodes whose subtree is ignored: the status bar, with its clock.
VOLATILE_RESOURCE_IDS = frozenset({"com.android.systemui:id/status_bar", "com.android.systemui:id/clock"})

MASK64 = (1 << 64) - 1
HASH_SIZE = 8
SAMPLE_SIZE = 32

KeyMode = Literal["phash", "ui_tree", "auto"]


@cache
def _dct_matrix(n: int) -> np.ndarray:
    """Orthonormal DCT-II matrix: ``M @ x`` is the DCT of a column vector ``x``."""
    k = np.arange(n)[:, None]
    i = np.arange(n)[None, :]
    matrix = np.cos(np.pi * (2 * i + 1) * k / (2 * n)) * np.sqrt(2 / n)
    matrix[0] /= np.sqrt(2)
    return matrix


def phash64(image: bytes | Image.Image, status_bar_px: int | None = None) -> int:
    """The 64-bit perceptual hash (pHash) of a screenshot, status bar excluded.

    The screen below the status bar is reduced to 32x32 grey levels, transformed with a 2-D
    DCT, and the 8x8 lowest frequencies are compared with their median: one bit each. The
    result is a signed 64-bit integer (two's complement) so that it fits an int64 column.
    ``status_bar_px`` is in the image's pixels; by default ``STATUS_BAR_FRACTION`` of its
    height.
    """
    picture = Image.open(io.BytesIO(image)) if isinstance(image, bytes | bytearray | memoryview) else image
    width, height = picture.size
    top = round(height * STATUS_BAR_FRACTION) if status_bar_px is None else status_bar_px
    if not 0 <= top < height:
        raise InvalidInput(f"status_bar_px={top} leaves nothing of a {width}x{height} image")
    grey = picture.crop((0, top, width, height)).convert("L").resize((SAMPLE_SIZE, SAMPLE_SIZE),
                                                                      Image.Resampling.BOX)
    dct = _dct_matrix(SAMPLE_SIZE)
    coefficients = dct @ np.asarray(grey, dtype=np.float64) @ dct.T
    low = coefficients[:HASH_SIZE, :HASH_SIZE].ravel()
    bits = low > np.median(low)
    value = int.from_bytes(np.packbits(bits).tobytes(), "big")
    return value - (1 << 64) if value >= 1 << 63 else value


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit hashes (signed or unsigned)."""
    return ((a ^ b) & MASK64).bit_count()


def ui_tree_hash(xml: str) -> str:
    """A hash of an accessibility tree (uiautomator XML) that ignores the status bar and its
    clock, so the same screen at two times hashes the same. 16 hex digits."""
    root = ET.fromstring(xml)
    digest = hashlib.sha256()

    def visit(node: ET.Element, depth: int) -> None:
        if node.get("resource-id") in VOLATILE_RESOURCE_IDS:
            return
        attributes = "\x1f".join(f"{k}={v}" for k, v in sorted(node.attrib.items()))
        digest.update(f"{depth}\x1e{node.tag}\x1e{attributes}\n".encode())
        for child in node:
            visit(child, depth + 1)

    visit(root, 0)
    return digest.hexdigest()[:16]


def phash_key(phash: int) -> str:
    return f"ph:{phash & MASK64:016x}"


class AnchorKeyer:
    """Gives each step an anchor key as it is recorded, clustering within its group.

    With ``mode="phash"`` a step joins the nearest earlier cluster of its group whose
    representative (the cluster's first hash) is within ``threshold`` bits, else starts a new
    one; the key names the representative. ``"ui_tree"`` keys by :func:`ui_tree_hash` and
    needs a tree; ``"auto"`` uses the tree when one is given and the hash otherwise.

    Keys depend on the order steps arrive in only for hashes that are near but not equal;
    identical screens always share a key. For an order-independent keying of a whole group
    (a trainer that has every step), use :func:`group_anchor_keys`.
    """

    def __init__(self, threshold: int = DEFAULT_THRESHOLD, mode: KeyMode = "auto", max_groups: int = 4096):
        if not 0 <= threshold < 64:
            raise InvalidInput(f"threshold must be 0..63 bits, got {threshold}")
        if mode not in ("phash", "ui_tree", "auto"):
            raise InvalidInput(f"mode must be 'phash', 'ui_tree' or 'auto', got {mode!r}")
        self.threshold = threshold
        self.mode = mode
        self.max_groups = max_groups  # clusters of older groups are dropped (bounded memory)
        self._representatives: OrderedDict[str, list[int]] = OrderedDict()
        self._lock = threading.Lock()

    def key(self, group_id: str, *, image: bytes | Image.Image | None = None, phash: int | None = None,
            ui_tree: str | None = None) -> str:
        """The anchor key of one step of ``group_id``; give the screenshot or its phash, and
        the accessibility tree when there is one."""
        if ui_tree is not None and self.mode != "phash":
            return f"ui:{ui_tree_hash(ui_tree)}"
        if self.mode == "ui_tree":
            raise InvalidInput("AnchorKeyer(mode='ui_tree') needs ui_tree; use mode='auto' to fall back to phash")
        if phash is None:
            if image is None:
                raise InvalidInput("give the screenshot (image=) or its perceptual hash (phash=)")
            phash = phash64(image)
        with self._lock:
            representatives = self._representatives.setdefault(group_id, [])
            self._representatives.move_to_end(group_id)
            while len(self._representatives) > self.max_groups:
                self._representatives.popitem(last=False)
            nearest = min(representatives, key=lambda r: hamming(r, phash), default=None)
            if nearest is not None and hamming(nearest, phash) <= self.threshold:
                return phash_key(nearest)
            representatives.append(phash)
            return phash_key(phash)

    def forget(self, group_id: str) -> None:
        """Drops a finished group's clusters (keys already given stay valid)."""
        with self._lock:
            self._representatives.pop(group_id, None)


def group_anchor_keys(phashes: Sequence[int], threshold: int = DEFAULT_THRESHOLD) -> list[str]:
    """Keys for all steps of one group at once, independent of their order: hashes within
    ``threshold`` bits are linked, each connected set is one key (named by its smallest
    hash)."""
    links = ((i, j) for i, a in enumerate(phashes) for j in range(i) if hamming(a, phashes[j]) <= threshold)
    return connected_keys([value & MASK64 for value in phashes], links, phash_key)


def connected_keys(values: Sequence[Ordered], links: Iterable[tuple[int, int]],
                   name: Callable[[Ordered], str]) -> list[str]:
    """For each of `values`, the key of the connected set `links` put it in: `name` of the
    set's smallest value, so the key does not depend on the values' order."""
    roots = connected(len(values), links)
    smallest: dict[int, Ordered] = {}
    for r, value in zip(roots, values, strict=True):
        smallest[r] = min(smallest.get(r, value), value)
    return [name(smallest[r]) for r in roots]


def connected(n: int, links: Iterable[tuple[int, int]]) -> list[int]:
    """For each of `n` items, the representative of the connected set `links` put it in."""
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in links:
        parent[root(i)] = root(j)
    return [root(i) for i in range(n)]
