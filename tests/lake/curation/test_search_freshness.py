"""Full-text indexes keep up with the lake: rows recorded or enriched after `elake enrich`
built them are folded in by `elake optimize` (and by every compaction), on real Lance indexes."""

from __future__ import annotations

from episodelake.api.cli import main
from episodelake.collectors.jobs.enrich import enrich
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation.search import FIELDS, index_name, refresh_indexes, search
from episodelake.lake.storage import tables
from tests import factories


def record(lake: Lake, task: str, goal: str, screen: bytes, thinking: str) -> None:
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        with rec.start_episode(task, goal, episode_id=f"{task}-1") as ep:
            ep.log_step(screen, factories.response(thinking=thinking))


def unindexed(lake: Lake) -> dict[str, int]:
    """Rows each full-text index does not cover (a search reads them by a flat scan)."""
    return {column: lake.dataset(table).stats.index_stats(index_name(column))["num_unindexed_rows"]
            for table, column in FIELDS.values()}


def test_optimize_folds_later_rows_into_the_indexes_and_compacts(tmp_path):
    lake = Lake(tmp_path / "lake")
    record(lake, "pay", "buy the shoes", factories.text_screen("Checkout"), "open the cart")
    enrich(lake, ["ocr"])
    record(lake, "refund", "get my money back", factories.text_screen("Refund", "approved"), "ask politely")
    assert unindexed(lake) == {"ocr_text": 1, "thinking": 1, "model_response": 1, "task_goal": 1}
    report = lake.optimize()
    # Lance merges only fragments the same indexes cover: without folding first, nothing merged
    assert report["steps"] == {"fragments_before": 2, "fragments_after": 1, "versions_removed": 0}
    assert report["episodes"]["fragments_after"] == 1
    assert unindexed(lake) == dict.fromkeys(unindexed(lake), 0)
    assert {(h.episode_id, h.field) for h in search(lake, "politely")} == {("refund-1", "thinking"), ("refund-1", "response")}
    assert [(h.episode_id, h.field) for h in search(lake, "money")] == [("refund-1", "goal")]


def test_a_step_enriched_after_the_index_is_found_by_elake_search(tmp_path, capsys):
    lake = Lake(tmp_path / "lake")
    record(lake, "pay", "buy the shoes", factories.text_screen("Checkout"), "open the cart")
    record(lake, "bank", "check the balance", factories.text_screen("Overdrawn"), "look at it")
    enrich(lake, ["ocr"], where="e.task_name = 'pay'")  # builds the indexes; bank unread
    assert search(lake, "overdrawn") == []
    lake.optimize()  # one fragment, indexed, the bank step's text still null in it
    assert tables.fragment_count(lake.path, "steps") == 1
    enrich(lake, ["ocr"], where="e.task_name = 'bank'")  # rewrites ocr_text in the indexed fragment
    assert unindexed(lake)["ocr_text"] == 0  # enrichment folded the rewritten fragment back in
    assert main(["--lake", str(lake.path), "search", "overdrawn"]) == 0
    assert capsys.readouterr().out.split("\t")[:3] == ["bank-1", "0", "screen"]


def test_compaction_alone_folds_rows_into_every_index(tmp_path):
    """The server's background compaction calls `tables.compact` for the episodes table,
    whose goal index must not stop it."""
    lake = Lake(tmp_path / "lake")
    record(lake, "a", "first goal", factories.screenshot(0), "x")
    assert refresh_indexes(lake)["task_goal"] == "built"
    record(lake, "b", "second wish", factories.screenshot(1), "y")
    assert tables.compact(lake.path, "episodes") == (2, 1)
    lake.invalidate()
    assert lake.dataset("episodes").stats.index_stats("task_goal_fts")["num_unindexed_rows"] == 0
    assert [h.episode_id for h in search(lake, "wish")] == ["b-1"]
