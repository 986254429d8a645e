"""`update_columns` on a lake on S3 reaches the store the lake names, not the one the
environment names."""

from __future__ import annotations

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.ops.updates import update_columns
from episodelake.lake.storage.store import StoreUnavailable, location
from tests.factories import response, screenshot


def test_update_columns_uses_the_lakes_storage_options(s3_lake, s3_server, monkeypatch):
    with Recorder(s3_lake, run_id="r1", image_checks="structure") as rec:
        with rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id="ep-0") as ep:
            for s in range(2):
                ep.log_step(screenshot(s), response(), reward=0.5)
    # the variables now point nowhere; only the lake's own options reach the server
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    lake = Lake(location(s3_lake, {"aws_endpoint": s3_server.endpoint}))
    updated = update_columns(lake, "steps", [
        {"episode_id": "ep-0", "step": 1, "step_reward": 1.0, "step_reward_reason": "good"}])
    assert updated == 1
    assert [r["step_reward"] for r in lake.steps("ep-0").to_pylist()] == [None, 1.0]


def test_a_store_refusing_writes_during_an_update_is_store_unavailable(s3_proxied_lake, s3_proxy):
    """Reads work, every write is cut: the update's new column files and its commit fail, and
    that reads as the store being unavailable, as for every other write; nothing changes."""
    with Recorder(s3_proxied_lake, run_id="r1", image_checks="structure") as rec:
        with rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id="ep-0") as ep:
            for s in range(2):
                ep.log_step(screenshot(s), response(), reward=0.5)
    lake = Lake(location(s3_proxied_lake, {"client_max_retries": "0", "connect_timeout": "1s",
                                           "timeout": "2s"}))
    row = {"episode_id": "ep-0", "step": 1, "step_reward": 1.0, "step_reward_reason": "good"}
    with s3_proxy.refusing(lambda method, _: method in ("PUT", "POST")), \
            pytest.raises(StoreUnavailable, match=s3_proxied_lake):
        update_columns(lake, "steps", [row])
    assert [r["step_reward"] for r in lake.steps("ep-0").to_pylist()] == [None, None]
    assert update_columns(lake, "steps", [row]) == 1  # the store is back
