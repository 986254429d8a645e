"""The failure categories curated most (`lake.curation.categories`), on a real lake recorded
through the Recorder and curated through `lake.curation.curation`."""

from __future__ import annotations

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation import categories, curation
from tests.factories import response, screenshot


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    """Five episodes filed as: set A grounding x2, planning, one uncategorised, one removed
    (planning); set B grounding; a deleted set C with planning x3."""
    lake = Lake(tmp_path_factory.mktemp("categories") / "lake")
    with Recorder(lake, anchor=None) as rec:
        for n in range(5):
            with rec.start_episode("t", "goal", episode_id=f"e-{n}") as ep:
                ep.log_step(screenshot(n), response("click"))
                ep.finish(success=False)
    lake.invalidate()
    a, b, c = (curation.create_set(lake, name)["set_id"] for name in ("A", "B", "C"))
    for set_id, episode_id, category in [(a, "e-0", "grounding"), (a, "e-1", "grounding"), (a, "e-2", "planning"),
                                         (a, "e-3", None), (a, "e-4", "planning"), (b, "e-0", "grounding"),
                                         (c, "e-0", "planning"), (c, "e-1", "planning"), (c, "e-2", "planning")]:
        curation.add_member(lake, set_id, episode_id, failure_category=category)
    curation.remove_member(lake, a, "e-4")
    curation.delete_set(lake, c)
    return lake


def test_failure_categories_count_live_members_of_live_sets(lake):
    assert categories.failure_categories(lake, 10) == [
        {"failure_category": "grounding", "members": 3, "sets": 2},
        {"failure_category": "planning", "members": 1, "sets": 1},
        {"failure_category": None, "members": 1, "sets": 1},
    ]
    assert categories.failure_categories(lake, 1) == [{"failure_category": "grounding", "members": 3, "sets": 2}]
