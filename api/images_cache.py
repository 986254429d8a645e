"""Screenshots the API served recently, kept in memory: a step's image route asks the lake once.

On an object store one screenshot costs a row lookup (the `episode_id` index or a scan) and
a ranged read of the blob, several requests and tens of milliseconds on a real bucket, and
the web app asks for the same screenshots again and again (stepping back and forth in a
replay, the filmstrip, the source of each thumbnail). A local folder gains too, less.

A stored step's screenshot never changes: steps are append-only, image columns cannot be
updated, and nothing deletes a step. So each opened `Lake` (one lake view: the latest, or
a tag) has its own cache keyed by the step's identity, episode id and step, and a hit asks
the store nothing, not even for the latest version: a new version cannot change those bytes.
Misses are not kept, so a step recorded after a 404 is served as soon as it is there. The
cache is bounded by bytes (least recently used first out); one image larger than a quarter
of it is served but not kept. It goes with its `Lake` object, so a lake opened anew (a
restarted server, a lake rebuilt at the same path) starts empty.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

from episodelake.lake.storage.lake import Lake

#: Bytes of screenshots kept per server process (a phone PNG is 0.1 to 1 MB).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

Key = tuple[str, int]


class ImageCache:
    """(bytes, format) by key, least recently used first out once over `max_bytes`."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_bytes = max_bytes
        self._items: OrderedDict[Key, tuple[bytes, str]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Key) -> tuple[bytes, str] | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Key, value: tuple[bytes, str]) -> None:
        size = len(value[0])
        if size > self.max_bytes // 4:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old[0])
            self._items[key] = value
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped[0])

    @property
    def size(self) -> int:
        return self._bytes


_CACHES: weakref.WeakKeyDictionary[Lake, ImageCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_of(lake: Lake) -> ImageCache:
    """The image cache of this opened lake."""
    with _CACHES_LOCK:
        cache = _CACHES.get(lake)
        if cache is None:
            cache = _CACHES[lake] = ImageCache()
        return cache


def stored_image(lake: Lake, episode_id: str, step: int) -> tuple[bytes, str]:
    """One step's screenshot as stored and its format, from the lake's cache or the lake."""
    cache = cache_of(lake)
    key = (episode_id, step)
    hit = cache.get(key)
    if hit is not None:
        return hit
    value = lake.image(episode_id, step)
    cache.put(key, value)
    return value
