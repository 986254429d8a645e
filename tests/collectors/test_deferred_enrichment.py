"""Derived columns computed after the write: the recorder stores bytes and cheap checks, its
background worker (or the trainer, or `elake enrich`) fills the perceptual hash and anchor key
later, with the values the write path would have given, and flags what a full decode refuses."""

from __future__ import annotations

import pytest

from episodelake.collectors.jobs.enrich import enrich
from episodelake.collectors.jobs.rollout import RolloutReport
from episodelake.collectors.loop import EpisodeSummary
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.derive.derivations import BackgroundEnricher, enrich_anchor_keys
from episodelake.trainer import loop
from episodelake.trainer.config import TrainConfig
from tests.collectors.test_bad_input import with_damaged_pixels
from tests.factories import response, screenshot

TREE = ('<hierarchy><node resource-id="com.android.systemui:id/clock" text="{clock}"/>'
        '<node resource-id="app:id/list" text="Settings"/></hierarchy>')
COLUMNS = "episode_id, step, image_phash, anchor_key, ui_tree_hash, image_error"


def record_group(lake: Lake, **recorder) -> list[str]:
    """One GiGPO group of four episodes that pass through shared screens under different
    clocks (so anchor groups have several members), one step with a UI tree, and outcomes
    and rewards that differ."""
    ids = []
    with Recorder(lake, run_id="r", **recorder) as rec:
        for e in range(4):
            with rec.start_episode("wifi", "Turn on Wi-Fi", episode_id=f"ep-{e}", group_id="g") as ep:
                for n in range(4):
                    clock = f"1{e}:0{n}"
                    ep.log_step(screenshot((n + e) % 3, clock=clock), response(coordinate=[n, e]),
                                reward=float(n == 3 and e % 2 == 0), step_reward=float((n + e) % 2),
                                ui_tree=TREE.format(clock=clock) if (e, n) == (1, 2) else None)
                ep.finish(success=e % 2 == 0, eval_score=float(e % 2 == 0))
            ids.append(ep.episode_id)
    lake.invalidate()
    return ids


def stored(lake: Lake) -> list[dict]:
    lake.invalidate()
    return lake.sql(f"SELECT {COLUMNS} FROM steps ORDER BY episode_id, step").to_pylist()


def test_keys_derived_later_equal_the_keys_computed_at_write_time(tmp_path):
    at_write = Lake(tmp_path / "decode")
    record_group(at_write, image_checks="decode")
    later = Lake(tmp_path / "deferred")
    record_group(later, background_enrich=False)
    before = stored(later)
    assert all(r["image_phash"] is None for r in before)
    assert [r["anchor_key"] is None for r in before] == [r["ui_tree_hash"] is None for r in before]
    report = enrich(later, ["phash"])
    assert report.steps == {"phash": 16} and report.damaged == 0
    assert stored(later) == stored(at_write)
    assert stored(at_write)[6]["anchor_key"].startswith("ui:")  # a UI tree's key is kept


def test_gigpo_advantages_with_deferred_keys_equal_those_with_write_time_keys(tmp_path):
    """The trainer keys its own batch first (`step_advantages`), so no step of a deferred
    recording reaches the advantages without the key the write path would have given."""
    advantages = {}
    for name, options in {"decode": {"image_checks": "decode"},
                          "deferred": {"background_enrich": False}}.items():
        lake = Lake(tmp_path / name)
        ids = record_group(lake, **options)
        report = RolloutReport("r", episodes=[EpisodeSummary(i, "wifi", "finished", group_id="g") for i in ids])
        batch = loop.step_advantages(lake, report, TrainConfig(), history_length=0)
        result, samples = batch.advantages, batch.samples
        advantages[name] = {(r["episode_id"], r["step"]): (r["anchor_group_size"], r["advantage"])
                            for r in result.table.to_pylist()}
        assert len(samples) == 16
        keys = [r["anchor_key"] for r in stored(lake)]
        assert keys == [r["anchor_key"] for r in stored(Lake(tmp_path / "decode"))]  # the keys themselves
    assert advantages["deferred"] == advantages["decode"]
    assert max(size for size, _ in advantages["decode"].values()) > 1  # shared anchor states: a real test


def test_the_background_worker_keys_steps_while_recording_goes_on(lake):
    with Recorder(lake, run_id="r") as rec:
        assert rec.image_checks == "structure" and rec.enricher is not None
        for e in range(6):
            with rec.start_episode("t", "g", group_id="g") as ep:
                for n in range(3):
                    ep.log_step(screenshot(n, clock=f"0{e}:00"), response())
            rec.writer.flush()  # a commit while the worker may be writing its columns
        rec.flush()
        assert rec.enricher.wait_idle(60)
        assert rec.enricher.report.steps["phash"] == 18
    rows = stored(lake)
    assert len(rows) == 18 and all(r["anchor_key"] and r["image_phash"] is not None for r in rows)
    assert len({r["anchor_key"] for r in rows}) == 3  # the same screen under six clocks: one key
    assert lake.dataset("episodes").count_rows() == 6


def test_recording_can_leave_derived_columns_to_later(lake):
    with Recorder(lake, background_enrich=False) as rec:
        assert rec.enricher is None
        rec.start_episode("t", "g").log_step(screenshot(1), response())
    assert stored(lake)[0]["anchor_key"] is None
    with pytest.raises(Exception, match="background_enrich"):
        Recorder(lake, background_enrich="no")


def test_a_screenshot_only_a_full_decode_refuses_is_flagged_never_replaced(lake):
    """The write path's structure checks cannot see pixel data altered with its CRCs
    recomputed; enrichment decodes it, stores why it failed and derives nothing from it."""
    damaged = with_damaged_pixels(screenshot(1, size=(540, 1200)), at=0.5)
    good = screenshot(2)
    with Recorder(lake, background_enrich=False) as rec, rec.start_episode("t", "g", episode_id="e") as ep:
        ep.log_step(damaged, response())
        ep.log_step(good, response())
    report = enrich(lake, ["phash", "thumbs"])
    assert report.damaged == 1 and report.steps == {"phash": 1, "thumbs": 1}  # decoded once, flagged once
    assert "damaged screenshot, flagged in image_error" in report.summary()
    bad, fine = stored(lake)
    assert bad["image_error"].startswith("image: the PNG data is damaged")
    assert bad["image_phash"] is None and bad["anchor_key"] is None
    assert fine["image_error"] is None and fine["anchor_key"].startswith("ph:")
    assert lake.image("e", 0) == (damaged, "png")  # the bytes stay as received
    again = enrich(lake, ["phash"])
    assert again.damaged == 0 and again.steps == {"phash": 0}  # flagged once, not retried


def test_the_trainer_keys_only_steps_without_a_key(lake):
    ids = record_group(lake, background_enrich=False)
    first = enrich_anchor_keys(lake, ids, workers=2)
    assert first.steps == {"phash": 15}  # the step keyed by its UI tree is left alone
    assert enrich_anchor_keys(lake, ids).steps == {"phash": 0}
    assert None not in [r["anchor_key"] for r in stored(lake)]


def test_a_server_worker_enriches_steps_other_processes_commit(lake):
    worker = BackgroundEnricher(lake, ["phash", "thumbs"], interval_s=0.05).start()
    try:
        ids = record_group(lake, background_enrich=False)
        worker.wake()
        assert worker.wait_idle(60)
        rows = lake.sql("SELECT anchor_key, thumbnail_version FROM steps").to_pylist()
        assert len(rows) == 16 and all(r["anchor_key"] and r["thumbnail_version"] == 1 for r in rows)
        version = lake.dataset("steps").version
        worker.wake()
        assert worker.wait_idle(30)
        assert lake.dataset("steps").version == version  # nothing new: no commit, no rescan
        assert set(ids) == {r["episode_id"] for r in stored(lake)}
    finally:
        worker.stop()


@pytest.mark.slow
def test_the_demo_lake_comes_enriched(tmp_path, capsys):
    """`elake demo` fills the derived columns that take seconds (similar screens and thumbnails
    work on it at once) and leaves OCR, 15-30 minutes for the full demo, to `--enrich ...,ocr`
    or the server's background worker (`just up`)."""
    from episodelake.api.cli import main

    assert main(["--lake", str(tmp_path / "demo"), "demo", "--tasks", "1", "--group-size", "1",
                 "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "enriched phash: " in out and "embed: " in out and "ocr" not in out
    lake = Lake(tmp_path / "demo")
    missing = lake.sql("""SELECT count(*) steps,
                                 count(*) FILTER (WHERE image_phash IS NULL) phash,
                                 count(*) FILTER (WHERE thumbnail_version IS NULL) thumbs,
                                 count(*) FILTER (WHERE embedding_version IS NULL) embed,
                                 count(*) FILTER (WHERE ocr_version IS NULL) ocr,
                                 count(*) FILTER (WHERE anchor_key IS NULL) keys
                          FROM steps""").to_pylist()[0]
    assert missing == {"steps": missing["steps"], "phash": 0, "thumbs": 0, "embed": 0,
                       "ocr": missing["steps"], "keys": 0}
    assert main(["--lake", str(tmp_path / "other"), "demo", "--enrich", "phash,nope"]) == 1
    assert "nope" in capsys.readouterr().err
    assert not (tmp_path / "other" / "episodes.lance").exists()  # refused before recording
