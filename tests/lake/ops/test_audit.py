"""The audit log: each curation change is one row naming who, with the row before and after;
changes about an episode leave with it when it is purged."""

from __future__ import annotations

from pathlib import Path

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation import curation
from episodelake.lake.ops import audit, purge
from tests import factories

SECRET = "Maria Kowalski's flat is on the 4th floor"


def two_episodes(lake: Lake) -> list[str]:
    rec = Recorder(lake, anchor=None, run_id="r1")
    ids = []
    for k in range(2):
        with rec.start_episode("sms", f"goal {k}") as ep:
            ep.log_step(factories.screenshot(k), factories.response("click"))
            ep.finish(success=False)
        ids.append(ep.episode_id)
    rec.close()
    return ids


def test_each_change_is_a_row_with_who_and_the_row_before_and_after(lake):
    first, _ = two_episodes(lake)
    made = curation.create_set(lake, "failures", who="ana")
    curation.update_set(lake, made["set_id"], description="taps miss", who="bo")
    curation.add_member(lake, made["set_id"], first, note="one", added_by="ana")
    curation.add_member(lake, made["set_id"], first, note="two", added_by="bo")
    curation.remove_member(lake, made["set_id"], first, who="ana")
    log = audit.listing(lake, target_id=made["set_id"])
    assert [(e["action"], e["who"]) for e in log] == [
        ("member.remove", "ana"), ("member.put", "bo"), ("member.put", "ana"), ("set.update", "bo"),
        ("set.create", "ana")]
    assert log[1]["before"]["note"] == "one" and log[1]["after"]["note"] == "two"
    assert log[2]["before"] is None and log[0]["after"] is None
    assert log[3]["before"]["description"] is None and log[3]["after"]["description"] == "taps miss"
    assert {e["episode_id"] for e in log[:3]} == {first} and log[4]["episode_id"] is None
    assert [e["action"] for e in audit.listing(lake, who="bo")] == ["member.put", "set.update"]


def test_a_purged_episodes_changes_leave_the_audit_log(lake):
    victim, other = two_episodes(lake)
    made = curation.create_set(lake, "failures", who="ana")
    for episode in (victim, other):
        curation.add_member(lake, made["set_id"], episode, note=f"{SECRET} ({episode})", added_by="ana")
        curation.annotate(lake, episode, 0, note=SECRET, author="ana")
    report = purge.purge(lake, [victim])
    assert report["rows_removed"]["audit"] == 2
    left = audit.listing(lake)
    assert {e["episode_id"] for e in left} == {other, None}
    assert [e["action"] for e in left if e["episode_id"] is None] == ["set.create"]
    holding = [str(p) for p in Path(lake.path).rglob("*") if p.is_file()
               and f"{SECRET} ({victim})".encode() in p.read_bytes()]
    assert holding == [], holding
