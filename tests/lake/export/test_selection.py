"""The jobs that change stored episodes (judge back-fill, re-keying) choose their episodes
with the export's selection: a set, a condition over `episodes e JOIN steps s`, or both."""

from __future__ import annotations

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.curation import curation
from episodelake.lake.export.errors import EmptySelection
from episodelake.lake.export.selection import select, select_episodes
from episodelake.lake.export.spec import ExportSpec
from tests.factories import response, screenshot


def _record(lake) -> list[str]:
    with Recorder(lake, run_id="r1", anchor=None) as rec:
        for e in range(4):
            with rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id=f"ep-{e}",
                                   run_id="r1" if e < 3 else "r2") as ep:
                for s in range(e + 1):  # ep-N has N + 1 steps
                    ep.log_step(screenshot(s), response())
                ep.finish(success=e % 2 == 0)
    return [f"ep-{e}" for e in range(4)]


@pytest.mark.parametrize(("set_members", "where"), [
    (None, "run_id = 'r1'"),
    (None, "s.step >= 2"),  # a condition on steps, as an export's
    ([0, 1, 3], None),
    ([0, 1, 3], "run_id = 'r1'"),
])
def test_a_job_and_an_export_choose_the_same_episodes(lake, tmp_path, set_members, where):
    ids = _record(lake)
    set_name = None
    if set_members is not None:
        created = curation.create_set(lake, "chosen", kind="failure")
        set_name = created["name"]
        for i in set_members:
            curation.add_member(lake, created["set_id"], ids[i])
    chosen = select_episodes(lake, set_name=set_name, where=where)
    exported = select(lake, ExportSpec(format="llamafactory", out=tmp_path / "out", set=set_name, where=where,
                                       include_failed=True))
    assert chosen == sorted(e.episode_id for e in exported.episodes)
    assert chosen  # every case chooses something


def test_an_empty_set_is_refused_as_for_an_export(lake):
    _record(lake)
    curation.create_set(lake, "empty", kind="failure")
    with pytest.raises(EmptySelection, match="has no members"):
        select_episodes(lake, set_name="empty")
