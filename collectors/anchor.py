"""Anchor keys: which steps of an episode group saw "the same state" (GiGPO's anchor states).

An exact screenshot hash never matches across episodes once the status-bar clock moves, so
anchor groups built from it are all singletons and GiGPO's step-level term is always 0.
The key here is the screen's perceptual hash (status bar cropped, see `images.phash64`),
clustered within a group_id: a step joins the first cluster whose representative is within
`threshold` bits (Hamming), else it starts a new one. When the device gives an
accessibility tree, the tree's hash (clock and battery text removed) is the key instead.

Clustering is per recorder process; episodes of one group recorded by different processes
can get different keys for the same screen only if the hashes straddle the threshold.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict

from episodelake.collectors.images import hamming

DEFAULT_THRESHOLD = 6
_VOLATILE_TEXT = re.compile(r'(text|content-desc)="[^"]*(\d{1,2}:\d{2}|\d{1,3}%)[^"]*"')


def ui_tree_hash(xml: str) -> str:
    """A hash of an accessibility tree with clock- and battery-like text blanked."""
    stable = _VOLATILE_TEXT.sub(r'\1=""', xml)
    return hashlib.sha256(stable.encode("utf-8")).hexdigest()[:16]


class AnchorKeyer:
    """Assigns anchor keys; remembers cluster representatives of the `max_groups` latest groups."""

    def __init__(self, threshold: int = DEFAULT_THRESHOLD, max_groups: int = 4096):
        if not 0 <= threshold <= 64:
            raise ValueError(f"threshold must be between 0 and 64 bits, not {threshold}")
        self.threshold = threshold
        self.max_groups = max_groups
        self._groups: OrderedDict[str | None, list[int]] = OrderedDict()
        self._lock = threading.Lock()

    def key(self, group_id: str | None, phash: int | None, ui_tree: str | None = None) -> str:
        if ui_tree is not None:
            return "ui:" + ui_tree_hash(ui_tree)
        if phash is None:
            raise ValueError("an anchor key needs a perceptual hash or a UI tree")
        with self._lock:
            reps = self._groups.setdefault(group_id, [])
            self._groups.move_to_end(group_id)
            while len(self._groups) > self.max_groups:
                self._groups.popitem(last=False)
            for rep in reps:
                if hamming(rep, phash) <= self.threshold:
                    return f"ph:{rep & 0xFFFFFFFFFFFFFFFF:016x}"
            reps.append(phash)
            return f"ph:{phash & 0xFFFFFFFFFFFFFFFF:016x}"
