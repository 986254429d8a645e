"""The step image route's redacted preview, on a real server over a real lake."""

from __future__ import annotations

import io
import json

import httpx
from PIL import Image, ImageChops

from episodelake.api.settings import Settings
from episodelake.collectors.jobs.enrich import DERIVATIONS
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation.redact import MASK
from episodelake.lake.ops.updates import update_columns
from tests.api.webapp_support import ServerThread
from tests.factories import response
from tests.waiting import wait_job

SIZE = (200, 100)
#: Two text lines: a phone number (top half) and a word (bottom half).
LINES = [{"text": "call 555-0102", "x0": 0.1, "y0": 0.1, "x1": 0.9, "y1": 0.3, "score": 0.9},
         {"text": "Settings", "x0": 0.1, "y0": 0.6, "x1": 0.9, "y1": 0.8, "score": 0.9}]


def screen(colour: tuple[int, int, int] = (250, 250, 250)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", SIZE, colour).save(buf, format="PNG")
    return buf.getvalue()


def two_step_lake(path) -> Lake:
    """One finished episode of two plain screens; step 0 has text lines, step 1 none."""
    lake = Lake(path)
    with Recorder(lake, anchor=None) as rec, rec.start_episode("t", "goal", episode_id="ep") as ep:
        ep.log_step(screen(), response())
        ep.log_step(screen((240, 240, 250)), response())
        ep.finish(success=True)
    update_columns(lake, "steps", [{"episode_id": "ep", "step": 0, "ocr_boxes": LINES,
                                    "ocr_version": DERIVATIONS["ocr"].version}])
    return lake


def test_the_image_route_previews_the_redaction(tmp_path):
    lake = two_step_lake(tmp_path / "lake")
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as client:
        stored = client.get("/api/episodes/ep/steps/0/image")
        r = client.get("/api/episodes/ep/steps/0/image", params={"redact": 1})
        assert r.status_code == 200 and r.headers["content-type"] == "image/png"
        masked = Image.open(io.BytesIO(r.content)).convert("RGB")
        assert masked.getpixel((100, 20)) == MASK  # the phone number's line
        assert masked.getpixel((100, 70)) == (250, 250, 250)  # the word's line is kept
        original = Image.open(io.BytesIO(stored.content)).convert("RGB")
        assert ImageChops.difference(original, masked).getbbox()[3] < 50
        assert client.get("/api/episodes/ep/steps/0/image").content == stored.content  # the lake's bytes
        small = client.get("/api/episodes/ep/steps/0/image", params={"redact": 1, "max_side": 100})
        assert max(Image.open(io.BytesIO(small.content)).convert("RGB").getpixel((50, 10))) < 24  # JPEG
        missing = client.get("/api/episodes/ep/steps/1/image", params={"redact": 1})
        assert missing.status_code == 409 and "elake enrich --what ocr" in missing.json()["error"]["message"]


def test_an_api_export_takes_its_rules_inline(tmp_path):
    lake = two_step_lake(tmp_path / "lake")
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as client:
        body = {"format": "llamafactory", "val_fraction": 0.0, "redact": True, "redact_missing": "skip",
                "redact_rules": {"phone": False, "names": ["Settings"]}}
        r = client.post("/api/exports", json=body)
        assert r.status_code == 202, r.text
        done = wait_job(client, f"/api/exports/{r.json()['export_id']}")
        assert done["status"] == "finished", done["manifest"]
        redaction = done["manifest"]["redaction"]
        assert redaction["regions"] == {"name": 1} and redaction["rules"]["rules"] == ["card", "email", "name"]
        assert "Settings" not in json.dumps(done["manifest"]) and done["manifest"]["counts"]["skipped"] == {
            "no_text_to_redact": 1}
        bad = client.post("/api/exports", json={**body, "redact_rules": {"names": [""]}})
        assert bad.status_code == 422 and "names.0" in bad.json()["error"]["message"]
