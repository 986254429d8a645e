"""Upserts keep the key index of their table fresh: each upsert (an episode's row at start and
at finish, a curation write) looks its keys up, and rows outside the index are read in full,
so without upkeep every upsert and every caller-given id lookup got slower as the lake grew."""

from __future__ import annotations

from datetime import UTC, datetime

import lance

from episodelake.lake import Lake
from episodelake.lake.storage import tables
from episodelake.lake.storage.layout import table_path


def episode(i: int, status: str = "running") -> dict:
    return {"episode_id": f"ep-{i}", "run_id": "r", "task_name": "t", "task_goal": "g", "status": status,
            "created_at": datetime(2026, 1, 1, tzinfo=UTC)}


def outside_the_index(lake: Lake) -> int:
    ds = lance.dataset(str(table_path(lake.location, "episodes")))
    covered = {f for i in ds.describe_indices() if i.name == "episode_id_idx" for s in i.segments
               for f in s.fragment_ids}
    return len({f.fragment_id for f in ds.get_fragments()} - covered)


def test_one_row_upserts_keep_the_key_index_covering_all_but_a_few_fragments(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "INDEX_CHECK_EVERY", 4)
    monkeypatch.setattr(tables, "MAX_UNINDEXED_FRAGMENTS", 6)
    lake = Lake(tmp_path / "lake")
    for i in range(60):
        lake.upsert("episodes", [episode(i)])
        assert outside_the_index(lake) <= 6 + 4  # at most the threshold plus one check's worth
    for i in range(0, 60, 7):  # updates find and replace their row through the index
        lake.upsert("episodes", [episode(i, "finished")])
    assert lake.episode("ep-14")["status"] == "finished" and lake.episode("ep-15")["status"] == "running"
    assert lake.sql("SELECT count(*) AS n FROM episodes").to_pylist() == [{"n": 60}]


def test_without_the_upkeep_the_index_is_never_built(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "INDEX_CHECK_EVERY", 10**9)
    lake = Lake(tmp_path / "lake")
    for i in range(20):
        lake.upsert("episodes", [episode(i)])
    assert outside_the_index(lake) >= 20


def test_keep_key_index_says_whether_it_folded(tmp_path):
    lake = Lake(tmp_path / "lake")
    for i in range(5):
        lake.upsert("episodes", [episode(i)])
    assert tables.keep_key_index(lake.location, "episodes", max_unindexed=10) is False
    assert tables.keep_key_index(lake.location, "episodes", max_unindexed=2) is True
    assert outside_the_index(lake) == 0
