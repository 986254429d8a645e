"""Purge: an episode leaves every version, tag and file of the lake, provably; nothing else
changes; a purge killed midway is finished by running it again."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from episodelake.api import cli
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.ops import jobs, purge
from episodelake.lake.storage import layout, tables
from episodelake.lake.storage.errors import InvalidInput, NotFound
from tests import factories

GOAL = "Text Maria Kowalski about the 4th floor flat"


def build(lake: Lake) -> tuple[str, dict[str, list[bytes]], dict[str, str]]:
    """A lake whose victim episode shares fragments with others, sits in a tag, was upserted
    (a stale copy of its row stays in an old fragment), has a set membership, an annotation,
    a full-text index over its goal and a cached thumbnail. Returns (victim, images, goals)."""
    images: dict[str, list[bytes]] = {}
    goals: dict[str, str] = {}

    def record(n: int, first_goal: str | None = None) -> list[str]:
        made = []
        rec = Recorder(lake, anchor=None, run_id="r1")
        for _ in range(n):
            k = len(images)
            goal = first_goal if first_goal and not made else f"ordinary goal number {k}"
            with rec.start_episode("sms", goal) as ep:
                shots = [factories.screenshot(1000 + 10 * k + s) for s in range(3)]
                for shot in shots:
                    ep.log_step(shot, factories.response("click", thinking=f"step of {goal}"))
                ep.finish(success=True)
            images[ep.episode_id], goals[ep.episode_id] = shots, goal
            made.append(ep.episode_id)
        rec.close()
        return made

    first = record(1)
    victim = record(3, GOAL)[0]  # in one fragment with two others
    lake.create_tag("v1")
    record(2)
    lake.upsert("episodes", [{**lake.episode(victim), "eval_reason": "judged again"}])
    other = first[0]
    lake.upsert("set_members", [{"set_id": "s1", "episode_id": e, "note": f"note on {goals[e]}"} for e in (victim, other)])
    lake.upsert("annotations", [{"annotation_id": f"a-{e}", "episode_id": e, "step": 1, "note": goals[e]}
                                for e in (victim, other)])
    for table in ("steps", "episodes"):  # key indexes, as `optimize` builds them (without compacting)
        tables.index_keys(lake.location, table)
    lake.invalidate()
    if lake.location.is_local:
        from episodelake.lake.curation.search import refresh_indexes  # the goal's full-text index

        refresh_indexes(lake)
        for e in (victim, other):
            thumb = layout.thumbnail_path(lake.path, hashlib.sha256(images[e][0]).hexdigest(), 240)
            thumb.parent.mkdir(parents=True, exist_ok=True)
            thumb.write_bytes(b"JPEG of " + images[e][0][:50])
    return victim, images, goals


def needles(images: list[bytes], goal: str) -> list[bytes]:
    """The screenshots' digests (hex, as stored), their bytes and the goal."""
    return [hashlib.sha256(i).hexdigest().encode() for i in images] + list(images) + [goal.encode()]


def files_holding(root: Path, patterns: list[bytes]) -> list[str]:
    out = []
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            data = path.read_bytes()
            if any(p in data for p in patterns) or any(p.decode(errors="ignore") in name for p in patterns[:3]):
                out.append(str(path.relative_to(root)))
    return out


def snapshot(lake: Lake, ids: list[str]) -> dict:
    """Every stored value of these episodes, screenshot bytes included (row ids left out)."""
    episodes, steps = lake.episode_batch(ids, images=True)
    return {"episodes": episodes.sort_by("episode_id").to_pylist(),
            "steps": steps.sort_by([("episode_id", "ascending"), ("step", "ascending")]).to_pylist()}


def test_purge_one_episode_everywhere(lake):
    victim, images, goals = build(lake)
    assert files_holding(lake.path, needles(images[victim], GOAL))  # the scan does find them before
    # full-text indexes hold the goal's words (encoded: no byte scan sees them): they must go
    indexes = {lake.path / f"{t}.lance" / "_indices" / str(segment.uuid) for t in ("steps", "episodes")
               for index in lake.dataset(t).describe_indices() if not index.name.endswith("_idx")
               for segment in index.segments}
    assert len(indexes) == 3 and all(p.is_dir() for p in indexes)
    others = sorted(e for e in images if e != victim)
    before, before_tag = snapshot(lake, others), snapshot(lake.at("v1"), [e for e in others if e in
                                                                          lake.at("v1").sql("select episode_id from episodes")["episode_id"].to_pylist()])
    report = purge.purge(lake, [victim])

    assert files_holding(lake.path, needles(images[victim], GOAL)) == []
    assert report["proof"]["files_holding"] == 0 and report["proof"]["rows_found"] == 0
    assert report["proof"]["digests_searched"] == 3 and report["proof"]["texts_searched"] == 1
    assert report["rows_removed"] == {"steps": 3, "episodes": 1, "set_members": 1, "annotations": 1, "audit": 0,
                                      "reviews": 0}
    assert report["thumbnails_deleted"] == 1
    assert report["indexes_dropped"] == {"episodes": ["task_goal_fts"], "steps": ["model_response_fts", "thinking_fts"]}
    assert not any(p.exists() for p in indexes)  # their files are gone with them
    fresh = Lake(lake.path)
    assert snapshot(fresh, others) == before
    assert snapshot(fresh.at("v1"), list({r["episode_id"] for r in before_tag["episodes"]})) == before_tag
    assert victim not in fresh.sql("select episode_id from episodes")["episode_id"].to_pylist()
    assert [i.name for i in fresh.dataset("steps").describe_indices()] == ["episode_id_idx"]  # kept, and used:
    assert all(fresh.steps(e).num_rows == 3 for e in others) and fresh.steps(victim).num_rows == 0
    assert fresh.at("v1").sql("select count(*) n from steps").to_pylist() == [{"n": 9}]  # 4 episodes - the victim
    assert fresh.sql("select count(*) n from set_members").to_pylist() == [{"n": 1}]
    for table in purge.EPISODE_TABLES:  # only the latest and the tagged version are left
        assert len(fresh.dataset(table).versions()) <= 2
    record = jobs.list_jobs(fresh, kind="purge")[0]
    assert record["status"] == "done" and record["who"] and record["params"]["episode_ids"] == [victim]
    assert record["result"]["report"]["rows_removed"]["steps"] == 3
    assert GOAL not in json.dumps(record, default=str)


def test_only_the_fragments_holding_the_episode_are_rewritten(lake):
    victim, images, _ = build(lake)
    fragments = {f.fragment_id for f in lake.dataset("steps").get_fragments()}
    report = purge.purge(lake, [victim])
    assert report["fragments_rewritten"]["steps"] == 1 and len(fragments) == 3
    kept = {f.fragment_id for f in Lake(lake.path).dataset("steps").get_fragments()}
    assert len(fragments & kept) == 2  # the other two fragments are the same files
    assert report["bytes_rewritten"] > sum(len(i) for e, shots in images.items() if e != victim for i in shots[:1])


def test_dry_run_changes_nothing_and_bad_selections_are_one_line(lake, capsys):
    victim, _, _ = build(lake)
    versions = lake.current_versions()
    plan = purge.plan(lake, purge.select(lake, episode_ids=[victim])).summary()
    assert plan["rows"]["steps"] == 3 and plan["tags_to_recreate"]["steps"] == ["v1"]
    assert cli.main(["--lake", str(lake.path), "purge", "--episode", victim, "--dry-run"]) in (0, None)
    assert cli.main(["--lake", str(lake.path), "purge", "--episode", victim]) in (0, None)
    assert "add --yes" in capsys.readouterr().out
    assert Lake(lake.path).current_versions() == versions
    with pytest.raises(NotFound, match="unknown episode id"):
        purge.select(lake, episode_ids=["nope"])
    with pytest.raises(InvalidInput, match="matches no episode"):
        purge.select(lake, where="task_name = 'none'")
    capsys.readouterr()
    assert cli.main(["--lake", str(lake.path), "purge", "--where", "task_name = 'none'", "--yes"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matches no episode" in err


def test_purge_by_condition_on_the_command_line(lake, capsys):
    victim, images, _ = build(lake)
    capsys.readouterr()
    assert cli.main(["--lake", str(lake.path), "purge", "--where", f"task_goal = '{GOAL}'", "--yes", "--json"]) in (0, None)
    report = json.loads(capsys.readouterr().out)
    assert report["episodes"] == 1 and report["proof"]["files_holding"] == 0
    assert files_holding(lake.path, needles(images[victim], GOAL)) == []
    [record] = jobs.list_jobs(Lake(lake.path), kind="purge")
    assert record["params"]["where_sha256"] == hashlib.sha256(f"task_goal = '{GOAL}'".encode()).hexdigest()


def test_an_episode_deleted_earlier_is_purged_by_id(lake):
    victim, images, _ = build(lake)
    lake.dataset("steps").delete(f"episode_id = '{victim}'")
    lake.dataset("episodes").delete(f"episode_id = '{victim}'")
    lake.invalidate()
    assert purge.select(lake, episode_ids=[victim]) == [victim]
    purge.purge(lake, [victim])
    assert files_holding(lake.path, needles(images[victim], GOAL)) == []


@pytest.mark.parametrize("delete", [False, True])
def test_exports_holding_the_data_are_listed_and_deleted_when_asked(lake, tmp_path, delete):
    victim, images, _ = build(lake)
    holding, clean = layout.exports_root(lake.path) / "exp-1", layout.exports_root(lake.path) / "exp-2"
    for folder in (holding, clean):
        folder.mkdir(parents=True)
    (holding / "img.png").write_bytes(images[victim][1])
    (clean / "img.png").write_bytes(images[next(e for e in images if e != victim)][1])
    report = purge.purge(lake, [victim], delete_exports=delete)
    assert report["exports_holding"] == ["exp-1"]
    assert holding.exists() is not delete and clean.exists()


_KILL_AFTER_TAG_RESTORE = """
import os, signal, sys
from episodelake.lake import Lake
from episodelake.lake.ops import purge
restore = purge.lance.LanceDataset.restore
def restore_then_die(self):
    restore(self)
    os.kill(os.getpid(), signal.SIGKILL)  # the latest version is now the tag's old content
purge.lance.LanceDataset.restore = restore_then_die
purge.purge(Lake(sys.argv[1]), [sys.argv[2]])
"""


def test_a_purge_killed_midway_is_finished_by_running_it_again(lake):
    victim, images, _ = build(lake)
    others = sorted(e for e in images if e != victim)
    before = snapshot(lake, others)
    child = subprocess.run([sys.executable, "-c", _KILL_AFTER_TAG_RESTORE, str(lake.path), victim],
                           env=factories.child_env(), capture_output=True, text=True)
    assert child.returncode == -signal.SIGKILL, child.stderr
    stopped = Lake(lake.path)
    [record] = jobs.list_jobs(stopped, kind="purge")
    assert record["status"] == "interrupted"  # never readable as complete
    assert files_holding(lake.path, needles(images[victim], GOAL))  # old versions still hold it
    assert cli.main(["--lake", str(lake.path), "purge", "--episode", victim, "--yes"]) in (0, None)
    done = Lake(lake.path)
    assert [j["status"] for j in jobs.list_jobs(done, kind="purge")] == ["done"]
    assert files_holding(lake.path, needles(images[victim], GOAL)) == []
    assert snapshot(done, others) == before  # the current version came back, not the tag's
    assert done.at("v1").sql("select count(*) n from steps").to_pylist() == [{"n": 9}]


def test_purge_refuses_while_a_writer_records(lake):
    victim, _, _ = build(lake)
    writer = lake.writer()
    try:
        with pytest.raises(InvalidInput, match="a writer is recording"):
            purge.purge(lake, [victim])
    finally:
        writer.close()
    assert jobs.list_jobs(lake, kind="purge") == []  # refused before it started: no record


def test_purge_refuses_while_a_server_holds_the_lake(lake):
    victim, _, _ = build(lake)
    server = jobs.Owner(lake.path)  # what `elake serve` holds while it runs
    try:
        with pytest.raises(InvalidInput, match="another process runs jobs"):
            purge.purge(lake, [victim])
    finally:
        server.close()
    purge.purge(lake, [victim])


def test_a_tag_on_the_current_version_is_recreated_too(lake):
    victim, images, _ = build(lake)
    lake.create_tag("now")
    others = sorted(e for e in images if e != victim)
    before = snapshot(lake.at("now"), others)
    plan = purge.plan(lake, [victim]).summary()
    assert plan["tags_to_recreate"]["steps"] == ["now", "v1"]
    report = purge.purge(lake, [victim])
    assert set(report["tags_recreated"]) == {"now", "v1"}
    fresh = Lake(lake.path)
    assert snapshot(fresh.at("now"), others) == before
    assert victim not in fresh.at("now").sql("select episode_id from steps")["episode_id"].to_pylist()
    assert files_holding(lake.path, needles(images[victim], GOAL)) == []


@pytest.mark.parametrize("count", [3, 700])  # one pass per pattern, and the anchors' pass
def test_the_matcher_finds_a_pattern_across_chunks(count):
    rng = __import__("random").Random(count)
    patterns = [rng.randbytes(rng.randint(100, 3000)) for _ in range(count)] + [b"a goal text"]
    haystack = bytearray(rng.randbytes(3 << 20))
    matcher = purge.Matcher(patterns)
    assert bool(matcher.anchors) is (count > purge.Matcher.FEW)

    def chunks(data: bytes):
        return lambda: (bytes(data[i:i + (1 << 20)]) for i in range(0, len(data), 1 << 20))

    assert not matcher.holds(chunks(haystack))
    for pattern in (patterns[0], patterns[-2], patterns[-1]):
        planted = bytearray(haystack)
        planted[(1 << 20) - 5:(1 << 20) - 5 + len(pattern)] = pattern  # across a chunk's end
        assert matcher.holds(chunks(planted))
