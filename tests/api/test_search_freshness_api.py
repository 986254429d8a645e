"""GET /api/search finds a step enriched after the full-text indexes were built, while the
server runs, and after `Lake.optimize` compacted the lake under it."""

from __future__ import annotations

import httpx

from episodelake.api.settings import Settings
from episodelake.collectors.jobs.enrich import enrich
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from tests import factories
from tests.api.webapp_support import ServerThread


def record(lake: Lake, task: str, screen: bytes) -> None:
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        with rec.start_episode(task, f"do {task}", episode_id=f"{task}-1") as ep:
            ep.log_step(screen, factories.response(thinking="look"))


def test_a_step_enriched_later_is_found_through_the_api(tmp_path):
    lake = Lake(tmp_path / "lake")
    record(lake, "pay", factories.text_screen("Checkout"))
    enrich(lake, ["ocr"])  # builds the indexes
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as client:
        record(lake, "bank", factories.text_screen("Overdrawn"))
        assert client.get("/api/search", params={"q": "overdrawn"}).json() == []  # not read yet
        enrich(lake, ["ocr"])
        lake.optimize()
        hits = client.get("/api/search", params={"q": "overdrawn"}).json()
    assert [(h["episode_id"], h["step"], h["field"]) for h in hits] == [("bank-1", 0, "screen")]
    assert lake.dataset("steps").stats.index_stats("ocr_text_fts")["num_unindexed_rows"] == 0
