"""The shared background thread of the server's compactor and the enrichment workers: a pass
that fails is logged and retried, never fatal; idle means nothing left since the last wake."""

from __future__ import annotations

import logging
import threading

from episodelake.lake import Lake
from episodelake.lake.ops.background import BackgroundWorker


class Flaky(BackgroundWorker):
    name = "test-worker"

    def __init__(self, lake: Lake, failures: int):
        super().__init__(lake, interval_s=0.05)
        self.failures = failures
        self.passes: list[bool] = []
        self.done = threading.Event()

    def _pass(self, woken: bool) -> None:
        self.passes.append(woken)
        if len(self.passes) <= self.failures:
            raise RuntimeError("disk on fire")
        self.done.set()


def test_a_failing_pass_is_logged_and_the_next_pass_runs(tmp_path, caplog):
    worker = Flaky(Lake(tmp_path / "lake"), failures=2)
    with caplog.at_level(logging.WARNING, logger="episodelake.lake.ops.background"):
        worker.start().wake()
        assert worker.done.wait(10)
        assert worker.wait_idle(10)
        worker.stop()
    assert len(worker.passes) >= 3 and worker.passes[0] is True  # woken, then the interval's passes
    failed = [r for r in caplog.records if "test-worker failed" in r.getMessage()]
    assert len(failed) == 2 and "disk on fire" in failed[0].exc_text


def test_not_idle_while_passes_fail(tmp_path):
    worker = Flaky(Lake(tmp_path / "lake"), failures=10**9)
    worker.start().wake()
    assert not worker.wait_idle(0.5)
    worker.stop()
    assert not worker._thread.is_alive()


def test_a_lake_pinned_at_a_tag_starts_no_thread(tmp_path):
    lake = Lake(tmp_path / "lake")
    lake.create_tag("v1")
    worker = Flaky(lake.at("v1"), failures=0).start()
    assert not worker._thread.is_alive()
