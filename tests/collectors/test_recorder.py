"""Recorder on a real lake: what a step row holds, and every kind of bad input."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.storage.errors import Conflict, InvalidInput
from tests.factories import response, screenshot


@pytest.fixture
def rec(lake):
    r = Recorder(lake, run_id="run-1", policy_version="p1", env="test")
    yield r
    r.close()


def _count(lake, where="true"):
    return lake.sql(f"select count(*) from steps where {where}").column(0)[0].as_py()


def test_episode_round_trip(rec, lake):
    png = screenshot(1)
    with rec.start_episode("wifi_on", "Turn on Wi-Fi", group_id="g1") as ep:
        s0 = ep.log_step(png, response("click", coordinate=[100, 200]), reward=0.0, step_reward=1.0,
                         step_reward_reason="opened settings", prompt=[{"role": "user", "content": "x"}])
        ep.log_step(base64.b64encode(screenshot(2)).decode(), response("terminate", status="success"))
        ep.finish(success=True, eval_score=1.0, eval_reason="wifi is on")
    rec.flush()
    assert rec.enricher.wait_idle(30)  # the anchor key is derived after the commit
    episode = lake.episode(ep.episode_id)
    assert episode["status"] == "finished" and episode["success"] is True
    assert episode["episode_length"] == 2 and episode["run_id"] == "run-1" and episode["group_id"] == "g1"
    steps = lake.steps(ep.episode_id).to_pylist()
    assert [s["step"] for s in steps] == [0, 1]
    first = steps[0]
    assert first["action_type"] == "click" and first["action_valid"] is True
    assert first["x"] == pytest.approx(100 / 999) and first["y"] == pytest.approx(200 / 999)
    assert first["thinking"] == "tap the button" and first["step_reward_reason"] == "opened settings"
    assert first["width"] == 108 and first["height"] == 240 and first["image_format"] == "png"
    assert first["image_sha256"] == s0.image_sha256 and first["anchor_key"].startswith("ph:")
    assert lake.image(ep.episode_id, 0) == (png, "png")  # stored byte for byte


def test_episode_batch_reads_only_those_episodes_with_their_screenshots(rec, lake):
    ids = []
    for k in range(3):
        with rec.start_episode("wifi_on", "Turn on Wi-Fi", group_id="g1") as ep:
            for t in range(2):
                ep.log_step(screenshot(10 * k + t), response("click"))
            ep.finish(success=False)
        ids.append(ep.episode_id)
    rec.flush()
    episodes, steps = lake.episode_batch(ids[:2], images=True)
    assert sorted(episodes["episode_id"].to_pylist()) == sorted(ids[:2])
    assert steps.num_rows == 4 and set(steps["episode_id"].to_pylist()) == set(ids[:2])
    for row in steps.to_pylist():
        assert row["image"] == lake.image(row["episode_id"], row["step"])[0]
    _, bare = lake.episode_batch(ids[2:])
    assert "image" not in bare.column_names and bare.num_rows == 2
    with pytest.raises(InvalidInput, match="episode_id"):
        lake.episode_batch(["../etc"])
    with pytest.raises(InvalidInput, match="at least one"):
        lake.episode_batch([])


def test_pil_numpy_and_jpeg_inputs(rec, lake):
    jpeg = screenshot(3, fmt="JPEG")
    ep = rec.start_episode("t", "g")
    ep.log_step(Image.open(io.BytesIO(screenshot(4))), "")
    ep.log_step(np.zeros((50, 20, 3), np.uint8), "")
    ep.log_step(jpeg, "")
    ep.finish(success=False)
    rec.flush()
    assert [f for _, f in (lake.image(ep.episode_id, n) for n in range(3))] == ["png", "png", "jpeg"]
    assert lake.image(ep.episode_id, 2)[0] == jpeg


@pytest.mark.parametrize("checks", ["decode", "structure"])
def test_same_screen_at_two_clock_times_shares_anchor_key(lake, checks):
    """Keyed as the step is written (`decode`), or after the commit by the background worker."""
    with Recorder(lake, image_checks=checks) as r:
        ep = r.start_episode("t", "g", group_id="g7")
        a = ep.log_step(screenshot(5, size=(540, 1200), clock="09:41"), "")
        b = ep.log_step(screenshot(5, size=(540, 1200), clock="17:02"), "")
        c = ep.log_step(screenshot(6, size=(540, 1200), clock="09:41"), "")
        ep.finish()
        r.flush()
        assert (r.enricher is None) == (checks == "decode")
        assert r.enricher is None or r.enricher.wait_idle(30)
    assert a.image_sha256 != b.image_sha256
    keys = lake.steps(ep.episode_id, columns=["anchor_key"])["anchor_key"].to_pylist()
    assert keys[0] == keys[1] != keys[2]
    assert [a.anchor_key, b.anchor_key, c.anchor_key] == (keys if checks == "decode" else [None] * 3)


def test_an_anchor_that_is_not_a_keyer_is_refused(lake):
    with pytest.raises(InvalidInput, match="anchor: an AnchorKeyer, None or 'default', not 'exact'"):
        Recorder(lake, anchor="exact")


def test_unparseable_response_is_kept_flagged(rec, lake):
    ep = rec.start_episode("t", "g")
    ep.log_step(screenshot(1), "I will click somewhere nice")
    ep.finish()
    rec.flush()
    row = lake.steps(ep.episode_id).to_pylist()[0]
    assert row["action_type"] == "unparsed" and row["action_valid"] is False
    assert row["model_response"] == "I will click somewhere nice" and row["action_error"]


def test_exception_marks_episode_aborted_and_keeps_steps(rec, lake):
    with pytest.raises(RuntimeError):
        with rec.start_episode("t", "g") as ep:
            ep.log_step(screenshot(1), response())
            raise RuntimeError("device went away")
    rec.flush()
    row = lake.episode(ep.episode_id)
    assert row["status"] == "aborted" and "device went away" in row["eval_reason"]
    assert _count(lake, f"episode_id = '{ep.episode_id}'") == 1


BAD_IMAGES = [
    ("not base64 !!", "corrupt base64"),
    (b"hello, not an image", "not a PNG, JPEG or WebP"),
    (screenshot(1)[:300], "truncated"),
    (np.zeros((4, 4), np.float32), "numpy arrays must be uint8"),
]


@pytest.mark.parametrize(("image", "message"), BAD_IMAGES)
def test_bad_images_are_refused_and_nothing_is_lost(rec, lake, image, message):
    ep = rec.start_episode("t", "g")
    ep.log_step(screenshot(1), "")
    with pytest.raises(InvalidInput, match=message):
        ep.log_step(image, "")
    ep.log_step(screenshot(2), "")  # the episode goes on; the bad step took no number
    ep.finish()
    rec.flush()
    assert [s["step"] for s in lake.steps(ep.episode_id).to_pylist()] == [0, 1]


def test_huge_image_is_refused_before_decoding(rec):
    buf = io.BytesIO()
    Image.new("1", (8000, 7000)).save(buf, format="PNG")  # 56 MP, a tiny file
    with pytest.raises(InvalidInput, match="pixel limit"):
        rec.start_episode("t", "g").log_step(buf.getvalue(), "")


@pytest.mark.parametrize("field", ["reward", "step_reward"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), "1.0"])
def test_non_finite_rewards_are_refused(rec, field, value):
    ep = rec.start_episode("t", "g")
    with pytest.raises(InvalidInput, match=field):
        ep.log_step(screenshot(1), "", **{field: value})


def test_non_utf8_text_is_refused(rec):
    ep = rec.start_episode("t", "g")
    with pytest.raises(InvalidInput, match="model_response: not valid UTF-8"):
        ep.log_step(screenshot(1), b"\xff\xfe bad")
    with pytest.raises(InvalidInput, match="model_response: not valid UTF-8"):
        ep.log_step(screenshot(1), "lone surrogate \udcff")


def test_duplicate_step_and_log_after_finish(rec):
    ep = rec.start_episode("t", "g")
    ep.log_step(screenshot(1), "", step=0)
    with pytest.raises(Conflict, match="already has step 0"):
        ep.log_step(screenshot(1), "", step=0)
    ep.finish()
    with pytest.raises(Conflict, match="log_step after finish"):
        ep.log_step(screenshot(1), "")


@pytest.mark.parametrize("bad", ["../etc", "a/b", "..", "", "x y", "a\\b"])
def test_ids_with_path_separators_are_refused(rec, bad):
    with pytest.raises(InvalidInput, match="episode_id"):
        rec.start_episode("t", "g", episode_id=bad)


@pytest.mark.parametrize("checks", ["decode", "structure"])
def test_truncated_and_damaged_png_refused_at_both_check_levels(lake, checks):
    png = screenshot(1)
    damaged = bytearray(png)
    damaged[60] ^= 0xFF
    with Recorder(lake, image_checks=checks) as r:
        ep = r.start_episode("t", "g")
        for bad in (png[:-20], png[: len(png) // 2], bytes(damaged)):
            with pytest.raises(InvalidInput, match="truncated|damaged"):
                ep.log_step(bad, "")
        record = ep.log_step(png, "")
        assert (record.anchor_key is None) == (checks == "structure")
