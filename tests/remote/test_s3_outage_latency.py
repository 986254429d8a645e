"""Appends never wait on the store: every commit runs on the writer's own thread, so a
collector keeps logging steps at local-disk speed while the store refuses connections, and
nothing acknowledged is lost or doubled once it is back. Past `max_backlog_bytes` an append
is refused with the bound named. Behaviour, not timing: the bounds are generous."""

from __future__ import annotations

import time

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake, WriterOptions
from episodelake.lake.storage.writer import Backpressure
from tests.factories import response, screenshot
from tests.remote.proxy import flush_once_back


def test_log_step_keeps_its_pace_while_the_store_is_down_and_nothing_is_lost(s3_proxied_lake, s3_proxy):
    rec = Recorder(s3_proxied_lake, image_checks="structure", options=WriterOptions(batch_rows=4, max_age_s=0.2))
    ep = rec.start_episode("t", episode_id="through-outage")
    ep.log_step(screenshot(0), response())
    rec.flush()
    slowest = 0.0
    with s3_proxy.blocked():
        deadline = time.monotonic() + 6  # several full batches and age ticks while refused
        step = 1
        while time.monotonic() < deadline:
            started = time.monotonic()
            ep.log_step(screenshot(step % 5), response())
            slowest = max(slowest, time.monotonic() - started)
            step += 1
            time.sleep(0.05)
        assert rec.writer.last_error is not None  # the committer did try, and failed
    assert slowest < 1.0, f"a log_step waited {slowest:.2f} s on the store"
    flush_once_back(rec)  # the committer's retry lands the backlog once the store is back
    ep.finish(success=True)
    rec.close()
    rows = Lake(s3_proxied_lake).sql(
        "select count(*) n, count(distinct step) d from steps where episode_id = 'through-outage'").to_pylist()
    assert rows == [{"n": step, "d": step}]


def test_past_the_backlog_bound_an_append_is_refused_naming_it(s3_proxied_lake, s3_proxy):
    options = WriterOptions(batch_rows=2, max_age_s=0.2, max_backlog_bytes=200_000)
    rec = Recorder(s3_proxied_lake, image_checks="structure", options=options)
    ep = rec.start_episode("t", episode_id="bounded")
    with s3_proxy.blocked():
        logged = 0
        with pytest.raises(Backpressure, match=r"was not recorded \(the bound is WriterOptions\.max_backlog_bytes = 195 KiB\)"):
            for step in range(500):
                ep.log_step(screenshot(step % 5), response())
                logged += 1
    assert 0 < logged < 500
    flush_once_back(rec)  # the committer's retry lands the backlog once the store is back
    rec.close()
    n = Lake(s3_proxied_lake).sql("select count(*) n from steps where episode_id = 'bounded'").to_pylist()
    assert n == [{"n": logged}]  # every acknowledged step, and not the refused one
