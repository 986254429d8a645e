"""A long curation session through the real server: the server compacts on its own, so
the curation tables' fragment counts (what made member writes and episode reads slow) stay
bounded while writes go on, and no write fails on a conflict with the compaction."""

from __future__ import annotations

import httpx

from episodelake.api.maintenance import MAX_FRAGMENTS
from episodelake.api.settings import Settings
from episodelake.lake.storage import tables
from tests.api.webapp_support import ServerThread, build_lake
from tests.waiting import wait_for

EPISODES = [f"{task}-{i}" for task in ("wifi_on", "set_alarm", "send_message") for i in range(3)]


def test_server_compacts_curation_tables_on_its_own(tmp_path):
    lake = build_lake(tmp_path / "lake")
    writes, peak = 160, 0
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as client:
        made = client.post("/api/sets", json={"name": "fails", "kind": "failure"})
        assert made.status_code == 201, made.text
        set_id = made.json()["set_id"]
        for n in range(writes):
            episode = EPISODES[n % len(EPISODES)]
            if n % 2:
                got = client.put(f"/api/sets/{set_id}/members/{episode}",
                                 json={"failure_category": "grounding", "note": f"take {n}"})
            else:  # every annotation is a new row, so each one adds a fragment
                got = client.post(f"/api/episodes/{episode}/annotations", json={"step": 1, "note": f"a{n}"})
            assert got.status_code in (200, 201), got.text
            if n % 10 == 0:
                peak = max(peak, *(tables.fragment_count(lake.path, t) for t in ("annotations", "set_members")))
        wait_for(lambda: all(tables.fragment_count(lake.path, t) <= MAX_FRAGMENTS for t in ("annotations", "set_members")),
                 30, every_s=0.1, what="the background compaction")
        notes = {e: [a["note"] for a in client.get(f"/api/episodes/{e}/annotations").json()] for e in EPISODES}
        members = client.get(f"/api/sets/{set_id}/members").json()
    assert tables.fragment_count(lake.path, "annotations") <= MAX_FRAGMENTS
    assert tables.fragment_count(lake.path, "set_members") <= MAX_FRAGMENTS
    assert peak <= 2 * MAX_FRAGMENTS, peak  # bounded while writes go on, not only at the end
    assert sum(len(v) for v in notes.values()) == writes // 2  # nothing lost to a compaction
    assert len(members) == len(EPISODES)
