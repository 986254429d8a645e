"""How `sft_dataset` reads its samples' screenshots: batched blob reads, a cache by sha256,
decoding off the consumer's thread.

Measured on 1080x2400 PNG screenshots (bench/bench_dataset.py), the time of a sample goes to
decoding (about 35 ms per screenshot with PIL, three screenshots per sample at history 2)
and, with a Hugging Face processor, to the processor's own resizing; a `take_blobs` call
costs about 0.8 ms whatever it reads. So the reader:

- reads the screenshots of a block of upcoming samples with one `take_blobs` call (the
  block's distinct screenshots, whatever episodes they belong to), not one call per sample;
- keeps screenshots by sha256 (`ImageCache`): a history window shows a screenshot in up to
  `history_images + 1` samples, and an export folder read per sample decodes it each time;
  here it is decoded once while it stays in the cache (bytes for lazy images, decoded
  pixels when the dataset decodes: `images="rgb"` or a processor);
- decodes a block's screenshots on a small thread pool (PIL releases the GIL while it
  inflates a PNG) and builds the block's samples on a prefetch thread, `prefetch` samples
  ahead of the consumer, so reading and decoding overlap the training step.

Decoded pixels are shared by every sample that shows the screenshot, so they are handed out
read-only (numpy arrays with `writeable=False`; PIL images passed to a processor, which
converts them and does not draw on them).
"""

from __future__ import annotations

import io
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import lance
import numpy as np
from PIL import Image

from episodelake.lake.storage.errors import NotFound

#: Samples built together: their distinct screenshots are read with one `take_blobs` call.
BLOCK = 8

#: Held while a thread reads blobs through Lance; a fork (a DataLoader worker) waits for it,
#: so no child starts with Lance's runtime in the middle of a read of another thread (a
#: forked worker crashed with a segmentation fault when the parent's prefetch thread was
#: reading at the fork). The child gets a fresh lock.
_read_lock = threading.Lock()


def _before_fork() -> None:
    _read_lock.acquire()


def _after_fork_in_parent() -> None:
    _read_lock.release()


def _after_fork_in_child() -> None:
    global _read_lock
    _read_lock = threading.Lock()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)


def decode_rgb(data: bytes) -> Image.Image:
    """The screenshot's pixels as an RGB PIL image, decoded now."""
    with Image.open(io.BytesIO(data)) as image:
        rgb = image.convert("RGB") if image.mode != "RGB" else image.copy()
    rgb.load()
    return rgb


def rgb_array(data: bytes) -> np.ndarray:
    """The screenshot as a read-only (height, width, 3) uint8 array."""
    array = np.asarray(decode_rgb(data))
    array.setflags(write=False)
    return array


class ImageCache:
    """Least recently used values by sha256, at most `size` of them."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[str, Any] = OrderedDict()
        self.hits = self.misses = 0

    def get(self, sha: str) -> Any:
        value = self._items.get(sha)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
            self._items.move_to_end(sha)
        return value

    def put(self, sha: str, value: Any) -> None:
        self._items[sha] = value
        self._items.move_to_end(sha)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


class BlobReader:
    """Screenshots by (row id, sha256) from one version of the `steps` table: each block's
    missing ones in one `take_blobs` call, kept in `cache` as bytes or as decoded values
    (`decode`, on `threads` threads). Made once per process (`pid`: a DataLoader worker makes
    its own, from the dataset it was handed, even a forked one that inherited this)."""

    def __init__(self, steps: lance.LanceDataset, cache: ImageCache,
                 decode: Callable[[bytes], Any] | None = None, threads: int = 1):
        self.pid = os.getpid()
        self.steps = steps
        self.cache = cache
        self.decode = decode
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self.calls = 0

    def read(self, wanted: dict[str, tuple[int, str]]) -> dict[str, Any]:
        """Values by sha256 for `wanted` (sha -> (row id, where, for errors))."""
        out: dict[str, Any] = {}
        missing: list[tuple[str, int, str]] = []
        for sha, (rowid, where) in wanted.items():
            value = self.cache.get(sha)
            if value is None:
                missing.append((sha, rowid, where))
            else:
                out[sha] = value
        if not missing:
            return out
        self.calls += 1
        raw = []
        with _read_lock:
            blobs = self.steps.take_blobs("image", ids=[m[1] for m in missing])
            for (sha, _, where), blob in zip(missing, blobs, strict=True):
                if blob is None:
                    raise NotFound(f"{where}: screenshot {sha} has no bytes in the lake")
                with blob:
                    raw.append(blob.read())
        values: Iterable[Any] = raw
        if self.decode is not None:
            if self.threads > 1 and len(raw) > 1:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="elake-decode")
                values = list(self._pool.map(self.decode, raw))
            else:
                values = [self.decode(data) for data in raw]
        for (sha, _, _), value in zip(missing, values, strict=True):
            self.cache.put(sha, value)
            out[sha] = value
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


_DONE = object()


def prefetched(blocks: Iterator[list[Any]], build: Callable[[list[Any]], list[Any]],
               ahead: int) -> Iterator[Any]:
    """`build(block)`'s items for each block, in order. With `ahead` > 0 a thread builds
    blocks while the consumer works, at most about `ahead` items ahead; its errors are
    raised here, in the consumer. Stopping early (break, close) stops the thread."""
    if ahead <= 0:
        for block in blocks:
            yield from build(block)
        return
    ready: queue.Queue = queue.Queue(maxsize=max(1, ahead // BLOCK))
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for block in blocks:
                if stop.is_set() or not put(build(block)):
                    return
            put(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            put(exc)

    thread = threading.Thread(target=produce, name="elake-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = ready.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield from item
    finally:
        stop.set()
