"""GET /api/search on a real server over a lake with real Lance inverted indexes."""

from __future__ import annotations

import httpx
import pytest

from episodelake.api.settings import Settings
from episodelake.collectors.jobs.enrich import enrich
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from tests import factories
from tests.api.webapp_support import ServerThread


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    lake = Lake(tmp_path_factory.mktemp("search") / "lake")
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        with rec.start_episode("pay", "buy the shoes", episode_id="pay-1") as ep:
            ep.log_step(factories.text_screen("Payment", "declined"), factories.response(thinking="retry"))
    enrich(lake, ["ocr"])
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as c:
        yield c


def test_search_returns_hits_with_their_boxes(client):
    r = client.get("/api/search", params={"q": "declined"})
    assert r.status_code == 200, r.text
    [hit] = r.json()
    assert (hit["episode_id"], hit["step"], hit["field"]) == ("pay-1", 0, "screen")
    assert [b["text"].lower() for b in hit["boxes"]] == ["declined"]
    assert set(hit["boxes"][0]) == {"text", "x0", "y0", "x1", "y1", "score"}


def test_where_narrows_and_bad_input_is_named(client):
    assert client.get("/api/search", params={"q": "declined", "where": "s.step = 3"}).json() == []
    bad = client.get("/api/search", params={"q": "declined", "where": "nope("})
    assert bad.status_code == 400 and "where 'nope('" in bad.json()["error"]["message"]
    assert client.get("/api/search", params={"q": "declined", "limit": 0}).status_code == 422
    blank = client.get("/api/search", params={"q": " "})
    assert blank.status_code == 422 and blank.json()["error"]["message"].startswith("q:")
