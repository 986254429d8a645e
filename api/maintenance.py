"""Compaction in the background of the API server, so curation stays fast however long it runs.

Every curation write (`Lake.upsert`: a set, a member, an annotation) is one Lance commit that
adds a fragment (and marks the replaced row deleted in an older one). Reads and the next
merge then touch every fragment: after about 1,500 writes a member write took 300 ms and an
episode read 260 ms, against 60 and 41 ms once compacted. The server therefore compacts a
table on its own once its fragment count passes a threshold.

The work happens on one background thread: a request only marks its table as written (a set
insert) and never waits for a compaction. Compaction is a Lance commit like any other;
when a concurrent write wins, it is planned again and retried (`tables.retry_commit`), and
the writes it raced with are retried the same way on their side. A failure is logged and
tried again at the table's next write. Tables written by other processes (collectors'
episode rows, the CLI) are looked at every `CHECK_INTERVAL_S` too. `steps` is left to
`elake optimize`: compacting it rewrites every screenshot.

Beside it, a `BackgroundEnricher` (`lake.derive.derivations`) fills the derived columns of
steps that any process commits (`Settings.background_enrich`, by default the perceptual hash
and the anchor key made from it; `elake serve --background-enrich none` turns it off), so
recorders that exited before their own worker reached every step still leave a lake whose
steps all get their keys.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from episodelake.lake.derive.derivations import BATCH_IMAGES, BackgroundEnricher
from episodelake.lake.ops.background import BackgroundWorker
from episodelake.lake.storage import schema, tables
from episodelake.lake.storage.lake import Lake

log = logging.getLogger(__name__)

#: Compact a table once it has more fragments than this (each compaction brings it to ~1).
MAX_FRAGMENTS = tables.MAX_FRAGMENTS
#: How often tables are looked at even when nothing was written through this server.
CHECK_INTERVAL_S = 60.0
#: Every table but `steps`, whose compaction rewrites all screenshots.
WATCHED = tuple(t for t in schema.TABLES if t != "steps")


class AutoCompactor(BackgroundWorker):
    """Keeps the fragment count of the watched tables of one lake at most `max_fragments`."""

    name = "lake-auto-compact"
    after_failure = "it is tried again after the table's next write"

    def __init__(self, lake: Lake, *, max_fragments: int = MAX_FRAGMENTS,
                 watched: Iterable[str] = WATCHED, check_interval_s: float = CHECK_INTERVAL_S):
        super().__init__(lake, interval_s=check_interval_s)
        self.max_fragments = max_fragments
        self.watched = tuple(watched)
        #: compactions done so far (for `elake serve`'s logs and for tests)
        self.compactions = 0
        self._dirty: set[str] = set(self.watched)  # a lake may come in fragmented: look once

    def _starting(self) -> None:
        self.lake.write_listeners.append(self.written)
        self._wake.set()

    def _stopping(self) -> None:
        if self.written in self.lake.write_listeners:
            self.lake.write_listeners.remove(self.written)

    def written(self, table: str) -> None:
        """Called after each upsert through the lake: costs a set insert, never a wait."""
        if table in self.watched:
            with self._lock:
                self._dirty.add(table)
            self.wake()

    def _pass(self, woken: bool) -> None:
        with self._lock:
            if not woken:  # other processes write too
                self._dirty.update(self.watched)
            todo = [t for t in self.watched if t in self._dirty]
            self._dirty.clear()
        for table in todo:
            if self.stopped.is_set():
                return
            self._compact_if_needed(table)

    def _compact_if_needed(self, table: str) -> None:
        try:
            before, after = tables.compact(self.lake.path, table, above=self.max_fragments)
            if before <= self.max_fragments:
                return
            self.compactions += 1
            self.lake.invalidate(table)
            log.info("compacted %s: %d -> %d fragments", table, before, after)
        except Exception:  # never fatal to the server; the table's next write tries again
            log.warning("background compaction of %s failed; it is tried again after the next write",
                        table, exc_info=True)


def background_enricher(lake: Lake, what: tuple[str, ...]) -> BackgroundEnricher | None:
    """The server's enrichment worker for `what` (none when empty), started. It commits as
    seldom as `elake enrich` does: a lake full of pending steps (an old one, or one a fleet of
    recorders fills) then costs a version per 64 screenshots, not per 8."""
    return BackgroundEnricher(lake, what, batch_images=BATCH_IMAGES).start() if what else None
