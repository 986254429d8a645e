"""One background thread per housekeeping job of a lake (compaction, enrichment), so the process
it lives in (a recorder, the server) never waits for that work.

A worker runs passes: one when woken (`wake`: something was written) and one every
`interval_s` otherwise (other processes write too). A pass that raises is logged and the
work stays for the next pass: housekeeping is never fatal to its host. `wait_idle` blocks
until a pass has found nothing more to do since the last wake, which is what shutdown and
tests wait for. A lake pinned at a tag is read-only, so no thread starts for it.
"""

from __future__ import annotations

import logging
import threading
from typing import Self

from episodelake.lake.storage.lake import Lake

log = logging.getLogger(__name__)


class BackgroundWorker:
    """The thread, its wake/stop/idle events and the pass loop; subclasses write `_pass`."""

    #: the thread's name, also the subject of the log line when a pass fails
    name = "lake-background"
    #: what happens to the work of a failed pass, for that log line
    after_failure = "it is tried again at the next pass"

    def __init__(self, lake: Lake, *, interval_s: float):
        self.lake = lake
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> Self:
        if self.lake.tag is None:
            self._starting()
            self._thread.start()
        return self

    def wake(self) -> None:
        with self._lock:
            self._idle.clear()
        self._wake.set()

    def wait_idle(self, timeout: float) -> bool:
        """Block until a pass has found nothing more to do since the last `wake`."""
        return self._idle.wait(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the pass in hand; what is left stays for the lake's next housekeeping."""
        self._stopping()
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def stopped(self) -> threading.Event:
        return self._stop

    # --- for subclasses ----------------------------------------------------------------------

    def _starting(self) -> None:
        """Runs in `start`, before the thread."""

    def _stopping(self) -> None:
        """Runs in `stop`, before the thread is told to end."""

    def _on_thread(self) -> None:
        """Runs first on the worker's own thread (e.g. to lower its priority)."""

    def _pass(self, woken: bool) -> None:
        """One round of work; `woken` is False when the interval ran out instead."""
        raise NotImplementedError

    # --- the loop ----------------------------------------------------------------------------

    def _run(self) -> None:
        self._on_thread()
        while not self._stop.is_set():
            woken = self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._pass(woken)
            except Exception:  # never fatal to the host process
                log.warning("%s failed; %s", self.name, self.after_failure, exc_info=True)
                continue
            if self._stop.is_set():  # the pass was cut short: not idle
                return
            with self._lock:
                if not self._wake.is_set():
                    self._idle.set()
