"""What the web app's search, similar-screens and redaction views read, on a real server
over a lake enriched with real OCR and embeddings."""

from __future__ import annotations

import httpx
import pytest

from episodelake.api.settings import Settings
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation import search as lake_search
from episodelake.lake.vocab.families import format_tool_call
from tests.api.search_lake import PAYMENT_STEP, build_search_lake
from tests.api.webapp_support import ServerThread, screen


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    pytest.importorskip("rapidocr_onnxruntime", reason="OCR needs the `ocr` extra: pip install -e '.[ocr]'")
    lake = build_search_lake(tmp_path_factory.mktemp("search-ui") / "lake")
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as c:
        yield c


def test_hits_name_their_task_and_the_words_to_highlight(client):
    hits = client.get("/api/search", params={"q": "declining"}).json()
    thinking = [h for h in hits if h["field"] == "thinking"]
    assert {(h["episode_id"], h["step"]) for h in thinking} == {("checkout-1", PAYMENT_STEP), ("checkout-2", PAYMENT_STEP)}
    assert all(h["terms"] == ["declined"] and h["task_name"] == "checkout" for h in thinking)
    screen = client.get("/api/search", params={"q": "payment failed", "where": "e.episode_id = 'checkout-1'"}).json()
    assert [(h["field"], h["step"]) for h in screen] == [("screen", PAYMENT_STEP)]
    assert screen[0]["terms"] == ["failed", "payment"] and screen[0]["boxes"]


def test_one_episodes_hits_are_all_found_past_the_candidate_cap(client, monkeypatch):
    monkeypatch.setattr(lake_search, "MAX_CANDIDATES", 1)  # the server runs in this process
    for episode in ("checkout-1", "checkout-2"):
        hits = client.get("/api/search", params={"q": "payment", "episode_id": episode}).json()
        assert [(h["episode_id"], h["field"]) for h in hits] == [(episode, "screen")]
    bad = client.get("/api/search", params={"q": "payment", "episode_id": "x'y"})
    assert bad.status_code == 422 and "episode_id" in bad.json()["error"]["message"]


def test_similar_screens_say_where_they_come_from(client):
    [twin] = client.get(f"/api/episodes/checkout-1/steps/{PAYMENT_STEP}/similar", params={"k": 1}).json()
    assert (twin["episode_id"], twin["step"]) == ("checkout-2", PAYMENT_STEP) and twin["distance"] < 1e-3
    assert (twin["task_name"], twin["run_id"], twin["policy_version"]) == ("checkout", "run-b", "v2")
    image = client.get(twin["image_url"], params={"max_side": 64})
    assert image.status_code == 200 and image.headers["content-type"] == "image/jpeg"
    missing = client.get("/api/episodes/raw-1/steps/0/similar")
    assert missing.status_code == 404 and "elake enrich --what embed" in missing.json()["error"]["message"]


def test_redaction_lists_the_rules_that_masked_each_line(client):
    r = client.get(f"/api/episodes/checkout-1/steps/{PAYMENT_STEP}/redaction")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rules"] == ["card", "email", "phone"]
    [region] = body["regions"]
    assert region["rule"] == "phone" and 0 <= region["x0"] < region["x1"] <= 1 and region["y0"] > 0.3
    assert client.get("/api/episodes/checkout-1/steps/0/redaction").json()["regions"] == []
    missing = client.get("/api/episodes/raw-1/steps/0/redaction")
    assert missing.status_code == 409 and "elake enrich --what ocr" in missing.json()["error"]["message"]
    assert client.get("/api/episodes/raw-1/steps/0/image", params={"redact": 1}).status_code == 409
    assert client.get("/api/episodes/raw-1/steps/9/redaction").status_code == 404


def test_the_overview_lists_a_run_whose_episodes_name_no_policy_version(client):
    r = client.get("/api/overview")
    assert r.status_code == 200, r.text
    runs = {run["run_id"]: run["policy_versions"] for run in r.json()["latest_runs"]}
    assert runs == {"run-a": ["v1"], "run-b": ["v2"], None: []}


def test_coverage_says_how_much_screen_text_is_read(client):
    body = client.get("/api/search/coverage").json()
    # the search lake reads every screenshot but the raw episode's
    assert body["screens_read"] + body["pending"] <= body["screenshots"] and body["screens_read"] > 0
    assert "elake enrich --what ocr" in body["how"]


def test_an_unread_lake_has_nothing_read_and_everything_pending(tmp_path):
    lake = Lake(tmp_path / "lake")
    with Recorder(lake, run_id="r") as rec:
        ep = rec.start_episode("t", "Open the app", episode_id="unread-1")
        for n in range(3):
            ep.log_step(screen(n, 0), format_tool_call({"action": "wait"}))
        ep.finish(success=False)
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        body = httpx.get(srv.url + "/api/search/coverage", timeout=30).json()
    assert (body["screenshots"], body["screens_read"], body["pending"]) == (3, 0, 3)
