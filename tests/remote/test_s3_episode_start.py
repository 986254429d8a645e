"""An episode's claim and row go to the store as the episode starts (`Recorder._open_row`):
on an object store they cost the commit path two commits before the episode's steps can
follow, so they go ahead while its first steps are being logged instead of holding those
steps back when their batch is due. Behaviour, on moto's real S3 API: with batches due only
after a minute, a started episode is in the lake within seconds while its steps still wait;
on a local lake (no such cost) its row waits with them."""

from __future__ import annotations

import time

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake, WriterOptions
from tests.factories import response, screenshot
from tests.waiting import wait_for

#: Nothing is due by age during a test: only the episode's start sends rows early.
LATE = WriterOptions(max_age_s=60)


def _count(uri: str, table: str, episode_id: str) -> int:
    return Lake(uri).sql(f"select count(*) from {table} where episode_id = '{episode_id}'")[0][0].as_py()


def test_a_started_episode_is_in_the_store_before_its_steps_are_due(s3_lake):
    rec = Recorder(s3_lake, image_checks="structure", anchor=None, options=LATE)
    ep = rec.start_episode("t", "goal", episode_id="starts-early")
    wait_for(lambda: _count(s3_lake, "episodes", "starts-early") == 1, 30, every_s=0.2,
             what="the started episode's row in the store")
    ep.log_step(screenshot(0), response())
    time.sleep(1.0)  # several ticks of the writer's thread: the step is not due for a minute
    assert _count(s3_lake, "steps", "starts-early") == 0
    ep.finish(success=True)
    rec.close()
    assert _count(s3_lake, "steps", "starts-early") == 1
    assert Lake(s3_lake).episode("starts-early")["status"] == "finished"


def test_on_a_local_lake_the_row_waits_for_its_batch(tmp_path):
    uri = str(tmp_path / "lake")
    rec = Recorder(uri, image_checks="structure", anchor=None, options=LATE)
    ep = rec.start_episode("t", "goal", episode_id="waits")
    time.sleep(1.0)
    assert _count(uri, "episodes", "waits") == 0
    ep.finish(success=True)
    rec.close()
    assert _count(uri, "episodes", "waits") == 1
