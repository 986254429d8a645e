"""`elake enrich --ray` on a lake on S3 (moto's server on loopback): Ray tasks read the
screenshots from the store themselves, the driver writes the derived columns, and the result
is what one process computes on a local copy of the same steps."""

from __future__ import annotations

import pytest

from episodelake.api.cli import main
from episodelake.collectors.jobs.enrich import enrich
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from tests.factories import needs_ray, response, screenshot

pytestmark = [needs_ray, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:lance is not fork-safe")]

COLUMNS = ("episode_id, step, image_phash, anchor_key, thumbnail, thumbnail_version, embedding, "
           "embedding_version, image_error")


def record(location) -> Lake:
    lake = Lake(location)
    with Recorder(lake, background_enrich=False) as rec:
        for e in range(3):
            with rec.start_episode("t", "g", episode_id=f"ep-{e}", group_id="g") as ep:
                for n in range(3):
                    ep.log_step(screenshot(n, clock=f"1{e}:00"), response())
    lake.invalidate()
    return lake


def derived(lake: Lake) -> list[dict]:
    lake.invalidate()
    return lake.sql(f"SELECT {COLUMNS} FROM steps ORDER BY episode_id, step").to_pylist()


def test_enrich_on_ray_reads_the_store_in_tasks_and_matches_one_process(ray_on_s3, tmp_path):
    remote = record(ray_on_s3)
    assert main(["enrich", "--what", "phash,thumbs,embed", "--ray"]) == 0  # the lake: $ELAKE_LAKE
    local = record(tmp_path / "lake")
    assert enrich(local, ["phash", "thumbs", "embed"]).steps == {"phash": 9, "thumbs": 9, "embed": 9}
    there, here = derived(remote), derived(local)
    assert len(there) == 9 and there == here
    assert all(r["anchor_key"] and r["thumbnail_version"] == 1 and r["embedding_version"] for r in there)
    jobs = remote.sql("SELECT kind, status, params FROM jobs WHERE kind = 'enrich'").to_pylist()
    assert [j["status"] for j in jobs] == ["done"] and '"ray": true' in jobs[0]["params"]
