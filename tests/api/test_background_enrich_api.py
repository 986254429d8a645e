"""The server fills derived step columns in the background: steps a recorder committed without
their perceptual hash and anchor key (a process that exited before its own worker reached
them) get them while the server runs, with the keys a write-time decode gives; the setting
turns it off."""

from __future__ import annotations

import time

import httpx

from episodelake.api.cli import main
from episodelake.api.settings import Settings
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.derive.anchor import phash64, phash_key
from tests.api.webapp_support import ServerThread
from tests.factories import response, screenshot
from tests.waiting import wait_for

QUERY = "SELECT episode_id, step, image_phash, anchor_key FROM steps ORDER BY episode_id, step"


def keyless_lake(path) -> Lake:
    lake = Lake(path)
    with Recorder(lake, background_enrich=False) as rec:
        for e in range(3):
            with rec.start_episode("t", "g", episode_id=f"ep-{e}", group_id="g") as ep:
                for n in range(3):
                    ep.log_step(screenshot(n, clock=f"1{e}:00"), response())
    return lake


def rows_through_the_api(client: httpx.Client) -> list[dict]:
    got = client.post("/api/sql", json={"query": QUERY})
    assert got.status_code == 200, got.text
    body = got.json()
    names = [c["name"] for c in body["columns"]]
    return [dict(zip(names, row, strict=True)) for row in body["rows"]]


def test_the_server_keys_steps_committed_without_keys(tmp_path):
    lake = keyless_lake(tmp_path / "lake")
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as client:
        def keyed() -> list[dict] | None:
            rows = rows_through_the_api(client)
            return rows if all(r["anchor_key"] is not None for r in rows) else None

        rows = wait_for(keyed, 60, every_s=0.2, what="the server to key every step")
    assert len(rows) == 9
    for row in rows:
        expected = phash64(screenshot(row["step"], clock=f"1{row['episode_id'][-1]}:00"))
        assert row["image_phash"] == expected and row["anchor_key"] == phash_key(expected)


def test_background_enrichment_is_a_setting(tmp_path):
    lake = keyless_lake(tmp_path / "lake")
    version = lake.dataset("steps").version
    settings = Settings(lake=lake.path, static_dir=None, background_enrich=())
    with ServerThread(settings, lake) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        time.sleep(3)  # longer than the worker's interval, were there one
        assert all(r["anchor_key"] is None for r in rows_through_the_api(client))
    assert lake.dataset("steps").version == version
    assert main(["--lake", str(lake.path), "serve", "--background-enrich", "nope"]) == 1
