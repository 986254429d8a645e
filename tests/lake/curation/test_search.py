"""`elake search`: full-text search on real Lance inverted indexes."""

from __future__ import annotations

import pytest

from episodelake.api.cli import main
from episodelake.collectors.jobs.enrich import enrich
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation.search import refresh_indexes, search
from episodelake.lake.storage.errors import InvalidInput, SqlRefused
from tests import factories


def record(lake: Lake, task: str, goal: str, steps: list[tuple[bytes, str]]) -> str:
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        with rec.start_episode(task, goal, episode_id=f"{task}-1") as ep:
            for image, thinking in steps:
                ep.log_step(image, factories.response(thinking=thinking))
    return ep.episode_id


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> Lake:
    lake = Lake(tmp_path_factory.mktemp("search") / "lake")
    record(lake, "pay", "buy the red shoes", [
        (factories.text_screen("Checkout"), "open the cart"),
        (factories.text_screen("Payment", "declined"), "the card did not work"),
    ])
    record(lake, "wifi", "turn on wireless", [(factories.text_screen("Network"), "open settings")])
    enrich(lake, ["ocr"])
    return lake


def test_a_word_only_on_a_screenshot_is_found_with_its_box(searched):
    hits = search(searched, "declined")
    assert [(h.episode_id, h.step, h.field) for h in hits] == [("pay-1", 1, "screen")]
    assert [b["text"].lower() for b in hits[0].boxes] == ["declined"]
    assert 0 <= hits[0].boxes[0]["y0"] < hits[0].boxes[0]["y1"] <= 1


def test_thinking_and_goals_are_searched(searched):
    assert {(h.step, h.field) for h in search(searched, "card")} == {(1, "thinking"), (1, "response")}
    assert [(h.episode_id, h.step, h.field) for h in search(searched, "wireless")] == [("wifi-1", None, "goal")]
    assert search(searched, "card declined") == []  # every word in one field


def test_where_restricts_and_a_bad_one_is_named(searched):
    assert {h.episode_id for h in search(searched, "open")} == {"pay-1", "wifi-1"}
    assert {h.episode_id for h in search(searched, "open", where="e.task_name = 'wifi'")} == {"wifi-1"}
    assert search(searched, "open", where="s.step = 1") == []
    with pytest.raises(SqlRefused, match="where 'nope\\('"):
        search(searched, "open", where="nope(")
    with pytest.raises(SqlRefused, match="where 'e.nope = 1'"):
        search(searched, "zzzz", where="e.nope = 1")  # checked even when no word matched
    with pytest.raises(SqlRefused, match="where 'true; DROP TABLE steps': not one SQL condition"):
        search(searched, "open", where="true; DROP TABLE steps")
    with pytest.raises(InvalidInput, match="q:"):
        search(searched, "  ")


def test_rows_after_the_index_are_found_then_indexed(tmp_path):
    lake = Lake(tmp_path / "lake")
    record(lake, "a", "first goal", [(factories.screenshot(0), "nothing here")])
    assert refresh_indexes(lake)["thinking"] == "built"
    record(lake, "b", "second goal", [(factories.text_screen("Refund"), "ask for a refund")])
    assert {h.field for h in search(lake, "refund", where="s.step = 0")} == {"thinking", "response"}
    stats = lake.dataset("steps").stats.index_stats("thinking_fts")
    assert stats["num_unindexed_rows"] == 1  # found by Lance's flat scan beside the index
    enrich(lake, ["ocr"])  # the newly enriched step, and the index folds the new rows in
    assert lake.dataset("steps").stats.index_stats("thinking_fts")["num_unindexed_rows"] == 0
    assert ("b-1", "screen") in {(h.episode_id, h.field) for h in search(lake, "refund")}


def test_cli_prints_hits_and_names_a_bad_where(searched, capsys):
    assert main(["--lake", str(searched.path), "search", "declined"]) == 0
    assert capsys.readouterr().out.split("\t")[:3] == ["pay-1", "1", "screen"]
    assert main(["--lake", str(searched.path), "search", "open", "--where", "nope("]) != 0
    assert "where 'nope('" in capsys.readouterr().err
