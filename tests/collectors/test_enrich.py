"""`elake enrich`: derived step columns written after the write, on real Lance datasets."""

from __future__ import annotations

import sys

import lance
import pyarrow as pa
import pytest

from episodelake.collectors.jobs.enrich import DERIVATIONS, enrich
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.derive import derivations as enrich_mod
from episodelake.lake.derive.anchor import phash64
from episodelake.lake.ops.jobs import list_jobs
from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import InvalidInput
from tests import factories

PAYMENT = factories.text_screen("Payment", "declined")
ORDER = factories.text_screen("Order", "placed")


def record(lake: Lake, images: list[bytes], task: str = "pay") -> str:
    """Steps recorded without the decode, so no perceptual hash is stored at write time."""
    rec = Recorder(lake, anchor=None, image_checks="structure")
    with rec.start_episode(task, "buy the shoes") as ep:
        for image in images:
            ep.log_step(image, factories.response(thinking="look at the screen"))
    rec.close()
    return ep.episode_id


def image_files(lake: Lake) -> set[str]:
    """The data files holding the `image` column, over every fragment."""
    ds = lake.dataset("steps")
    field_id = ds.lance_schema.field("image").id()
    return {f.path for frag in ds.get_fragments() for f in frag.data_files() if field_id in f.fields}


def test_enrich_fills_columns_without_rewriting_images(lake):
    episode = record(lake, [PAYMENT, ORDER, PAYMENT])
    files, images = image_files(lake), [lake.image(episode, s)[0] for s in range(3)]
    report = enrich(lake, ["phash", "ocr"])
    assert report.images == {"phash": 2, "ocr": 2}  # each distinct screenshot once
    assert report.steps == {"phash": 3, "ocr": 3}
    rows = lake.steps(episode).to_pylist()
    assert [r["image_phash"] for r in rows] == [phash64(PAYMENT), phash64(ORDER), phash64(PAYMENT)]
    assert "Payment" in rows[0]["ocr_text"] and "Order" in rows[1]["ocr_text"]
    assert rows[0]["ocr_boxes"] == rows[2]["ocr_boxes"] and rows[0]["ocr_version"] == 1
    box = rows[0]["ocr_boxes"][0]
    assert 0 <= box["x0"] < box["x1"] <= 1 and 0 <= box["y0"] < box["y1"] <= 1
    assert rows[0]["thumbnail_version"] is None  # not asked for
    assert image_files(lake) == files  # the blobs stay in the files they were written to
    assert [lake.image(episode, s)[0] for s in range(3)] == images
    assert len(rows) == 3


def test_enrich_resumes_and_then_does_nothing(lake, monkeypatch):
    episode = record(lake, [factories.screenshot(i) for i in range(3)])
    monkeypatch.setattr(enrich_mod, "BATCH_IMAGES", 1)
    writes = []
    real = enrich_mod.update_columns

    def stop_after_first(*args):
        if writes:
            raise KeyboardInterrupt
        writes.append(real(*args))

    monkeypatch.setattr(enrich_mod, "update_columns", stop_after_first)
    with pytest.raises(KeyboardInterrupt):
        enrich(lake, ["thumbs"])
    monkeypatch.setattr(enrich_mod, "update_columns", real)
    assert enrich(lake, ["thumbs"]).images == {"thumbs": 2}  # only what the first run left
    version = lake.dataset("steps").version
    again = enrich(lake, ["thumbs"])
    assert again.steps == {"thumbs": 0} and "nothing to enrich" in again.summary()
    assert lake.dataset("steps").version == version  # no commit at all
    thumbs = lake.sql("SELECT thumbnail FROM steps WHERE episode_id = ? ORDER BY step", [episode])
    assert all(t.startswith(b"\xff\xd8") for t in thumbs["thumbnail"].to_pylist())  # JPEG
    statuses = [j["status"] for j in list_jobs(lake, kind="enrich")]
    assert sorted(statuses) == ["done", "done", "interrupted"]


def test_new_version_redoes_and_where_restricts(lake, monkeypatch):
    first = record(lake, [factories.screenshot(1)], task="a")
    second = record(lake, [factories.screenshot(2)], task="b")
    assert enrich(lake, ["thumbs"], where="e.task_name = 'a'").steps == {"thumbs": 1}
    assert lake.steps(second, ["thumbnail_version"])["thumbnail_version"].to_pylist() == [None]
    assert enrich(lake, ["thumbs"]).steps == {"thumbs": 1}
    newer = DERIVATIONS["thumbs"].__class__(**{**DERIVATIONS["thumbs"].__dict__, "version": 2})
    monkeypatch.setitem(DERIVATIONS, "thumbs", newer)
    assert enrich(lake, ["thumbs"]).steps == {"thumbs": 2}
    assert lake.steps(first, ["thumbnail_version"])["thumbnail_version"].to_pylist() == [2]


def test_bad_requests_name_what_is_wrong(lake, monkeypatch):
    record(lake, [factories.screenshot(0)])
    with pytest.raises(InvalidInput, match="what: unknown derivation"):
        enrich(lake, ["ocr", "colour"])
    with pytest.raises(InvalidInput, match="workers"):
        enrich(lake, ["thumbs"], workers=0)
    monkeypatch.setitem(sys.modules, "rapidocr_onnxruntime", None)
    enrich_mod._ocr_engine.cache_clear()
    try:
        with pytest.raises(InvalidInput, match=r"episodelake\[ocr\]"):
            enrich(lake, ["ocr"])
    finally:
        enrich_mod._ocr_engine.cache_clear()


def test_a_lake_from_before_gains_the_derived_columns(tmp_path):
    old = pa.schema([f for f in schema.STEPS if f.name not in ("ocr_text", "ocr_boxes", "ocr_version",
                                                                 "thumbnail", "thumbnail_version")])
    Lake(tmp_path / "lake")
    lance.write_dataset(old.empty_table(), str(tmp_path / "lake" / "steps.lance"), mode="overwrite")
    names = Lake(tmp_path / "lake").dataset("steps").schema.names
    assert {"ocr_text", "ocr_boxes", "ocr_version", "thumbnail", "thumbnail_version"} <= set(names)


def test_a_process_pool_stores_what_one_process_does(tmp_path):
    images = [factories.screenshot(i) for i in range(3)]
    one, pool = Lake(tmp_path / "one"), Lake(tmp_path / "pool")
    first, second = record(one, images), record(pool, images)
    enrich(one, ["phash", "thumbs"])
    assert enrich(pool, ["phash", "thumbs"], workers=2).steps == {"phash": 3, "thumbs": 3}
    columns = ["step", "image_phash", "thumbnail_version"]
    assert one.steps(first, columns).to_pylist() == pool.steps(second, columns).to_pylist()
