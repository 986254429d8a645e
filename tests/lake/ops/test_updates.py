"""`update_columns`: changing some columns of stored rows by key, images untouched."""

from __future__ import annotations

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.ops.updates import update_columns
from episodelake.lake.storage.errors import InvalidInput
from tests import factories


def test_update_some_columns_by_key(lake):
    rec = Recorder(lake, anchor=None)
    with rec.start_episode("t", "g") as ep:
        for s in range(3):
            ep.log_step(factories.screenshot(s), factories.response("click"), reward=0.5)
    rec.close()
    images = [lake.image(ep.episode_id, s)[0] for s in range(3)]
    n = update_columns(lake, "steps", [
        {"episode_id": ep.episode_id, "step": 1, "step_reward": 1.0, "step_reward_reason": "good"},
        {"episode_id": ep.episode_id, "step": 7, "step_reward": 0.0, "step_reward_reason": "gone"},
    ])
    assert n == 1
    rows = lake.steps(ep.episode_id).to_pylist()
    assert [r["step_reward"] for r in rows] == [None, 1.0, None]
    assert [r["reward"] for r in rows] == [0.5] * 3  # other columns kept
    assert [lake.image(ep.episode_id, s)[0] for s in range(3)] == images
    assert len(rows) == 3


@pytest.mark.parametrize("rows,problem", [
    ([{"episode_id": "e", "step_reward": 1.0}], "needs its key column"),
    ([{"episode_id": "e", "step": 0}], "nothing to update"),
    ([{"episode_id": "e", "step": 0, "image": b"x"}], "never rewritten"),
    ([{"episode_id": "e", "step": 0, "bogus": 1}], "unknown column"),
])
def test_bad_updates(lake, rows, problem):
    with pytest.raises(InvalidInput, match=problem):
        update_columns(lake, "steps", rows)
    with pytest.raises(InvalidInput, match="unknown table"):
        update_columns(lake, "nope", rows)
