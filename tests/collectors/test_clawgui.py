"""ClawGUI-RL compatibility: drop-in functions, folder import/export/watch on real files."""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path

import pytest

from episodelake.collectors import clawgui
from episodelake.collectors.clawgui import dropin, importer
from episodelake.lake import Lake
from episodelake.lake.derive.derivations import enrich_anchor_keys
from episodelake.lake.export import clawgui as clawgui_folders
from episodelake.lake.storage.errors import InvalidInput
from tests.factories import response, screenshot, write_reference_episode
from tests.waiting import wait_for


def test_drop_in_functions_record_into_the_lake(tmp_path, monkeypatch):
    lake_dir = tmp_path / "lake"
    monkeypatch.setenv("ELAKE_LAKE", str(lake_dir))
    eid = "3f2c9a1e-0000-4000-8000-000000000001"
    for n in range(3):
        clawgui.save_episode_to_json([base64.b64encode(screenshot(n)).decode()], [response()],
                                     "open wifi", "Turn on Wi-Fi", eid, step_number=n,
                                     step_reward=1.0, step_reward_reason="ok")
    assert clawgui.update_episode_result("open wifi", eid, 1.0, "done", 1.5, 3) is True
    assert clawgui.update_episode_result("open wifi", "no-such-episode", 1.0, "", 1.0, 1) is False
    dropin.close_recorders()
    lake = Lake(lake_dir)
    ep = lake.episode(eid)
    assert ep["success"] is True and ep["episode_reward"] == 1.5 and ep["episode_length"] == 3
    assert [s["step_reward"] for s in lake.steps(eid).to_pylist()] == [1.0, 1.0, 1.0]


def test_import_twice_gives_the_same_rows(tmp_path):
    root = tmp_path / "episode"
    for k in range(3):
        write_reference_episode(root, f"task {k}", f"ep-{k}", steps=4)
    lake = Lake(tmp_path / "lake")
    first = importer.import_clawgui(lake, root, progress=False)
    counts = lake.sql("select (select count(*) from episodes) e, (select count(*) from steps) s").to_pylist()
    second = importer.import_clawgui(lake, root, progress=False)
    assert first.episodes == second.episodes == 3
    assert counts == [{"e": 3, "s": 12}]
    assert lake.sql("select (select count(*) from episodes) e, (select count(*) from steps) s").to_pylist() == counts
    assert lake.image("ep-1", 2)[0] == screenshot(2)


def test_import_reports_broken_folders_and_missing_images(tmp_path):
    root = tmp_path / "episode"
    write_reference_episode(root, "good", "ep-good", steps=3, null_image_at=1)
    broken = root / "bad_task" / "ep-bad"
    broken.mkdir(parents=True)
    (broken / "episode.json").write_text('{"meta_data": {"task_name": "x"}, "episode": [')
    moved = write_reference_episode(root, "moved", "ep-moved", steps=2)
    doc = json.loads((moved / "episode.json").read_text())
    for rec in doc["episode"]:  # absolute paths from another machine
        rec["image_path"] = "/gone/elsewhere/images/" + Path(rec["image_path"]).name
    (moved / "episode.json").write_text(json.dumps(doc))
    lake = Lake(tmp_path / "lake")
    report = importer.import_clawgui(lake, root, progress=False)
    assert report.episodes == 2
    assert [p for p, _ in report.skipped] == [str(broken / "episode.json")]
    assert "broken JSON" in report.skipped[0][1]
    assert len(report.missing_images) == 1 and "null" in report.missing_images[0][1]
    missing = lake.steps("ep-good").to_pylist()[1]
    assert json.loads(missing["info"])["image_missing"] and missing["image_sha256"] is None
    assert lake.image("ep-moved", 1)[0] == screenshot(1)  # found beside the JSON


def test_export_then_import_round_trips(tmp_path):
    root = tmp_path / "episode"
    write_reference_episode(root, "a task", "ep-1", steps=3)
    lake = Lake(tmp_path / "lake")
    importer.import_clawgui(lake, root, progress=False)
    out = tmp_path / "out"
    assert clawgui_folders.export_clawgui(lake, out, progress=False) == 1
    doc = json.loads((out / "a_task" / "ep-1" / "episode.json").read_text())
    assert doc["meta_data"]["success"] is True and len(doc["episode"]) == 3
    assert Path(doc["episode"][2]["image_path"]).read_bytes() == screenshot(2)
    again = Lake(tmp_path / "lake2")
    importer.import_clawgui(again, out, progress=False)
    cols = "step, model_response, step_reward, image_sha256"
    assert again.sql(f"select {cols} from steps order by step").to_pylist() == \
        lake.sql(f"select {cols} from steps order by step").to_pylist()


def test_watch_ingests_a_growing_folder(tmp_path):
    root = tmp_path / "episode"
    root.mkdir()
    lake = Lake(tmp_path / "lake")
    stop = threading.Event()
    result = {}
    t = threading.Thread(target=lambda: result.update(r=importer.watch_clawgui(lake, root, interval_s=0.1, stop=stop)))
    t.start()
    try:
        write_reference_episode(root, "live", "ep-live", steps=2, finished=False)
        wait_for(lambda: lake.dataset("steps").count_rows() >= 2, 20, what="the watcher to import the first steps")
        folder = root / "live" / "ep-live"
        doc = json.loads((folder / "episode.json").read_text())
        (folder / "images" / "step_0002.png").write_bytes(screenshot(2))
        doc["episode"].append({"step": 2, "image_path": str(folder / "images" / "step_0002.png"),
                               "model_response": response(), "timestamp": "2026-11-30T10:00:05"})
        doc["meta_data"].update(success=False, eval_score=0.0, eval_reason="timeout", episode_reward=0.0,
                                episode_length=3, finished_at="2026-11-30T10:01:00")
        time.sleep(0.05)
        (folder / "episode.json").write_text(json.dumps(doc))
        wait_for(lambda: lake.dataset("steps").count_rows() >= 3 and lake.episode("ep-live")["status"] == "finished",
                 20, what="the watcher to import the finished episode")
    finally:
        stop.set()
        t.join()
    assert lake.dataset("steps").count_rows() == 3
    assert lake.episode("ep-live")["eval_reason"] == "timeout"
    imported = Lake(tmp_path / "imported")
    importer.import_clawgui(imported, root, progress=False)
    assert lake.episode("ep-live")["group_id"] == imported.episode("ep-live")["group_id"]
    assert lake.episode("ep-live")["group_id"].startswith("live@20261130T")
    assert lake.sql("select count(*) n from steps where anchor_key is null").to_pylist() == [{"n": 0}]


def test_import_of_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(Exception, match="is not a folder of ClawGUI episodes"):
        importer.import_clawgui(Lake(tmp_path / "lake"), tmp_path / "nope", progress=False)


def test_an_episode_with_a_lost_screenshot_still_reads_and_exports(tmp_path):
    root = tmp_path / "episode"
    write_reference_episode(root, "gap", "ep-gap", steps=3, null_image_at=1)
    lake = Lake(tmp_path / "lake")
    importer.import_clawgui(lake, root, progress=False)
    assert [step for step, _ in lake.images("ep-gap")] == [0, 2]
    with pytest.raises(Exception, match="has no screenshot"):
        lake.image("ep-gap", 1)
    clawgui_folders.export_clawgui(lake, tmp_path / "out", progress=False)
    doc = json.loads((tmp_path / "out" / "gap" / "ep-gap" / "episode.json").read_text())
    # the lost one points where its PNG would be: the reference viewer shows it without image
    assert [Path(r["image_path"]).exists() for r in doc["episode"]] == [True, False, True]


# -- nothing outside the import root is read ----------------------------------------------------
def _secret(tmp_path: Path) -> Path:
    """A readable PNG outside the import root: what a crafted folder would try to pull in."""
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    secret = outside / "step_0000.png"
    secret.write_bytes(screenshot(999))
    return secret


def _rewrite(folder: Path, **step0) -> None:
    doc = json.loads((folder / "episode.json").read_text())
    doc["episode"][0].update(step0)
    (folder / "episode.json").write_text(json.dumps(doc))


def _stored_hashes(lake: Lake) -> set[str]:
    rows = lake.sql("select image_sha256 from steps where image_sha256 is not null").to_pylist()
    return {r["image_sha256"] for r in rows}


def test_import_never_reads_a_file_outside_the_root(tmp_path, monkeypatch):
    import hashlib

    secret = _secret(tmp_path)
    root = tmp_path / "episode"
    absolute = write_reference_episode(root, "abs", "ep-abs", steps=2)
    (absolute / "images" / "step_0000.png").unlink()
    _rewrite(absolute, image_path=str(secret))  # absolute, outside, no copy beside the JSON
    relative = write_reference_episode(root, "rel", "ep-rel", steps=2)
    (relative / "images" / "step_0000.png").unlink()
    _rewrite(relative, image_path="../../../outside/step_0000.png")
    linked = write_reference_episode(root, "link", "ep-link", steps=2)
    (linked / "images" / "step_0000.png").unlink()
    (linked / "images" / "step_0000.png").symlink_to(secret)
    _rewrite(linked, image_path="images/step_0000.png")
    linked_dir = write_reference_episode(root, "linkdir", "ep-linkdir", steps=2)
    for png in (linked_dir / "images").iterdir():
        png.unlink()
    (linked_dir / "images").rmdir()
    (linked_dir / "images").symlink_to(secret.parent)
    outside_json = write_reference_episode(tmp_path / "elsewhere", "json", "ep-json", steps=1)
    (root / "json" / "ep-json").mkdir(parents=True)
    (root / "json" / "ep-json" / "episode.json").symlink_to(outside_json / "episode.json")
    (root / "task_link").symlink_to(tmp_path / "elsewhere" / "json")

    monkeypatch.chdir(secret.parent.parent)  # a relative path must not resolve against the cwd
    lake = Lake(tmp_path / "lake")
    report = importer.import_clawgui(lake, root, progress=False)

    assert hashlib.sha256(screenshot(999)).hexdigest() not in _stored_hashes(lake)
    skipped = dict(report.skipped)
    assert "outside the import root" in skipped[str(root / "json" / "ep-json" / "episode.json")]
    assert "outside the import root" in skipped[str(root / "task_link" / "ep-json" / "episode.json")]
    missing = dict(report.missing_images)
    for folder in (absolute, relative, linked, linked_dir):
        assert "outside the import root" in missing[f"{folder / 'episode.json'}#step0"], folder
    assert report.episodes == 4 and report.steps == 8  # the steps stay, flagged, without a screen
    step0 = lake.steps("ep-rel").to_pylist()[0]
    assert step0["image_sha256"] is None and "outside the import root" in json.loads(step0["info"])["image_missing"]
    assert lake.image("ep-rel", 1)[0] == screenshot(1)


def test_relative_image_paths_resolve_against_the_episode_folder(tmp_path, monkeypatch):
    root = tmp_path / "episode"
    folder = write_reference_episode(root, "rel", "ep-rel", steps=1)
    _rewrite(folder, image_path="images/step_0000.png")
    decoy = tmp_path / "cwd" / "images"
    decoy.mkdir(parents=True)
    (decoy / "step_0000.png").write_bytes(screenshot(7))
    monkeypatch.chdir(decoy.parent)
    lake = Lake(tmp_path / "lake")
    importer.import_clawgui(lake, root, progress=False)
    assert lake.image("ep-rel", 0)[0] == screenshot(0)


def test_a_moved_folder_reads_its_own_images_not_the_old_absolute_path(tmp_path):
    secret = _secret(tmp_path)
    root = tmp_path / "episode"
    folder = write_reference_episode(root, "moved", "ep-moved", steps=1)
    _rewrite(folder, image_path=str(secret))  # the old location exists, but outside the root
    lake = Lake(tmp_path / "lake")
    report = importer.import_clawgui(lake, root, progress=False)
    assert not report.missing_images
    assert lake.image("ep-moved", 0)[0] == screenshot(0)


# -- every bad folder is a skip with a reason -----------------------------------------------------
BAD_EPISODES = [
    ("meta_data.episode_length", {"meta_data": {"episode_length": 2**40}}),
    ("meta_data.episode_length", {"meta_data": {"episode_length": -1}}),
    ("meta_data.episode_length", {"meta_data": {"episode_length": "3"}}),
    ("meta_data.task_name", {"meta_data": {"task_name": 7}}),
    ("meta_data.task_goal", {"meta_data": {"task_goal": ["x"]}}),
    ("meta_data.episode_id", {"meta_data": {"episode_id": 12}}),
    ("meta_data.episode_id", {"meta_data": {"episode_id": "../x"}}),
    ("meta_data.eval_score", {"meta_data": {"eval_score": 10**400}}),
    ("meta_data.eval_score", {"meta_data": {"eval_score": "1.0"}}),
    ("meta_data.eval_score", {"meta_data": {"eval_score": True}}),
    ("meta_data.episode_reward", {"meta_data": {"episode_reward": float("inf")}}),
    ("meta_data.eval_reason", {"meta_data": {"eval_reason": 3}}),
    ("meta_data.created_at", {"meta_data": {"created_at": 5}}),
    ("meta_data.created_at", {"meta_data": {"created_at": "yesterday"}}),
    ("meta_data.finished_at", {"meta_data": {"finished_at": "2026-11-31T10:00:00"}}),
    ("episode[0].step", {"step0": {"step": 2**31}}),
    ("episode[0].step", {"step0": {"step": -1}}),
    ("episode[0].step", {"step0": {"step": True}}),
    ("episode[0].step", {"step0": {"step": 1.0}}),
    ("step 1 appears twice", {"step0": {"step": 1}}),
    ("episode[0].model_response", {"step0": {"model_response": ["x"]}}),
    ("episode[0].model_response", {"step0": {"model_response": "\ud800"}}),
    ("episode[0].timestamp", {"step0": {"timestamp": 17}}),
    ("episode[0].step_reward", {"step0": {"step_reward": "1"}}),
    ("episode[0].step_reward", {"step0": {"step_reward": 10**400}}),
    ("episode[0].step_reward_reason", {"step0": {"step_reward_reason": {"a": 1}}}),
    ("episode[0]", {"step0": None}),
    ("'episode'", {"doc": {"episode": {"0": {}}}}),
    ("meta_data", {"doc": {"meta_data": []}}),
    ("meta_data.success", {"meta_data": {"success": "false"}}),
    ("meta_data.success", {"meta_data": {"success": "true"}}),
    ("meta_data.success", {"meta_data": {"success": 0}}),
    ("meta_data.success", {"meta_data": {"success": 1}}),
]


def _write_bad(root: Path, n: int, change: dict) -> Path:
    folder = write_reference_episode(root, f"bad {n}", f"ep-bad-{n}", steps=2)
    doc = json.loads((folder / "episode.json").read_text())
    doc["meta_data"].update(change.get("meta_data", {}))
    if "step0" in change:
        doc["episode"][0] = None if change["step0"] is None else {**doc["episode"][0], **change["step0"]}
    doc.update(change.get("doc", {}))
    # json.dumps writes 10**400 as digits and inf as Infinity: both are what a file may hold
    (folder / "episode.json").write_text(json.dumps(doc))
    return folder / "episode.json"


def test_one_bad_folder_never_stops_the_import(tmp_path):
    root = tmp_path / "episode"
    bad = {_write_bad(root, n, change): field for n, (field, change) in enumerate(BAD_EPISODES)}
    deep = root / "deep" / "ep-deep"
    deep.mkdir(parents=True)
    (deep / "episode.json").write_text("[" * 100_000 + "]" * 100_000)
    bad[deep / "episode.json"] = "JSON"
    for k in range(3):
        write_reference_episode(root, "zz good", f"ep-good-{k}", steps=2)
    lake = Lake(tmp_path / "lake")
    report = importer.import_clawgui(lake, root, progress=False)
    assert report.episodes == 3 and report.steps == 6
    reasons = dict(report.skipped)
    assert set(reasons) == {str(p) for p in bad}
    for path, field in bad.items():
        assert field in reasons[str(path)], (field, reasons[str(path)])
    assert lake.sql("select count(*) n from episodes").to_pylist() == [{"n": 3}]


def test_the_import_command_reports_counts_and_goes_on(tmp_path, capsys):
    from episodelake.api import cli

    root = tmp_path / "episode"
    _write_bad(root, 0, {"meta_data": {"episode_length": 2**40}})
    _write_bad(root, 1, {"meta_data": {"task_name": 7}})
    write_reference_episode(root, "zz good", "ep-good", steps=2)
    assert cli.main(["--lake", str(tmp_path / "lake"), "import", "clawgui", str(root)]) == 0
    out = capsys.readouterr().out
    assert "imported 1 episode(s), 2 step(s)" in out and "skipped 2" in out
    assert "meta_data.episode_length" in out and "meta_data.task_name" in out


# -- booleans are parsed strictly ---------------------------------------------------------------
@pytest.mark.parametrize(("value", "stored"), [(False, False), (True, True), (None, False)])
def test_success_takes_json_booleans_only(tmp_path, value, stored):
    root = tmp_path / "episode"
    folder = write_reference_episode(root, "t", "ep-1", steps=1)
    doc = json.loads((folder / "episode.json").read_text())
    doc["meta_data"].update(success=value, eval_score=0.0)
    (folder / "episode.json").write_text(json.dumps(doc))
    lake = Lake(tmp_path / "lake")
    report = importer.import_clawgui(lake, root, progress=False)
    assert not report.skipped
    assert lake.episode("ep-1")["success"] is stored  # null: derived from eval_score > 0


# -- imported and drop-in episodes take part in GiGPO --------------------------------------------
def _advantages(lake: Lake):
    import duckdb

    from episodelake.trainer.advantages import compute_advantages

    con = duckdb.connect()
    con.register("episodes", lake.sql("select * from episodes"))
    con.register("steps", lake.sql("select episode_id, step, reward, step_reward, anchor_key, "
                                   "action_valid from steps"))
    return compute_advantages(con)


def _batch(root: Path, task: str, start: str, rollouts: int, *, seconds_apart: int = 7,
           success_every: int = 2) -> list[str]:
    """`rollouts` episodes of one task created within seconds: one reference training batch.
    Every rollout starts on the same screen (screenshot(0)) and then diverges."""
    from datetime import datetime, timedelta

    ids = []
    t0 = datetime.fromisoformat(start)
    for k in range(rollouts):
        eid = f"{task}-{start[11:16].replace(':', '')}-{k}"
        folder = write_reference_episode(root, task, eid, steps=3)
        for n in (1, 2):
            (folder / "images" / f"step_{n:04d}.png").write_bytes(screenshot(100 * k + n))
        doc = json.loads((folder / "episode.json").read_text())
        created = t0 + timedelta(seconds=seconds_apart * k)
        doc["meta_data"].update(created_at=created.isoformat(), success=k % success_every == 0,
                                eval_score=float(k % success_every == 0))
        (folder / "episode.json").write_text(json.dumps(doc))
        ids.append(eid)
    return ids


def test_imported_episodes_get_group_ids_and_anchor_keys_the_trainer_uses(tmp_path):
    root = tmp_path / "episode"
    first = _batch(root, "wifi", "2026-11-30T10:00:00", 4)
    other = _batch(root, "alarm", "2026-11-30T10:00:03", 3)
    later = _batch(root, "wifi", "2026-11-30T12:30:00", 2)  # the same task, a later batch
    lake = Lake(tmp_path / "lake")
    report = importer.import_clawgui(lake, root, progress=False)
    assert not report.skipped and not report.ungrouped
    groups = {r["episode_id"]: r["group_id"] for r in lake.sql("select episode_id, group_id from episodes").to_pylist()}
    assert len({groups[e] for e in first}) == len({groups[e] for e in other}) == len({groups[e] for e in later}) == 1
    assert len({groups[first[0]], groups[other[0]], groups[later[0]]}) == 3
    assert lake.sql("select count(*) n from steps where anchor_key is null").to_pylist() == [{"n": 0}]

    result = _advantages(lake)
    assert result.stats["episodes_without_group"] == 0
    assert result.table.num_rows == report.steps == 27
    by_key = {(r["episode_id"], r["step"]): r for r in result.table.to_pylist()}
    # step 0 shows one screen in every rollout of a batch: one anchor group per episode group
    assert {by_key[(e, 0)]["anchor_group_size"] for e in first} == {4}
    assert {by_key[(e, 0)]["anchor_group_size"] for e in later} == {2}
    assert any(by_key[(e, 0)]["step_advantage"] != 0 for e in first)
    assert {by_key[(e, 1)]["anchor_group_size"] for e in first} == {1}

    again = importer.import_clawgui(lake, root, progress=False)  # the same folder, the same ids
    assert again.episodes == report.episodes
    assert {r["episode_id"]: r["group_id"] for r in
            lake.sql("select episode_id, group_id from episodes").to_pylist()} == groups


def test_group_by_options(tmp_path):
    root = tmp_path / "episode"
    first = _batch(root, "wifi", "2026-11-30T10:00:00", 2)
    later = _batch(root, "wifi", "2026-11-30T10:20:00", 2)
    by_task = Lake(tmp_path / "by-task")
    importer.import_clawgui(by_task, root, group_by="task", progress=False)
    assert len({r["group_id"] for r in by_task.sql("select group_id from episodes").to_pylist()}) == 1
    wide = Lake(tmp_path / "wide")
    importer.import_clawgui(wide, root, window_min=30, progress=False)
    assert len({r["group_id"] for r in wide.sql("select group_id from episodes").to_pylist()}) == 1
    narrow = Lake(tmp_path / "narrow")
    importer.import_clawgui(narrow, root, window_min=10, progress=False)
    ids = {r["episode_id"]: r["group_id"] for r in narrow.sql("select episode_id, group_id from episodes").to_pylist()}
    assert ids[first[0]] == ids[first[1]] != ids[later[0]] == ids[later[1]]
    none = Lake(tmp_path / "none")
    report = importer.import_clawgui(none, root, group_by="none", progress=False)
    assert report.ungrouped == []  # asked for: not a problem to report
    assert none.sql("select count(*) n from episodes where group_id is null").to_pylist() == [{"n": 4}]
    with pytest.raises(Exception, match="group_by"):
        importer.import_clawgui(none, root, group_by="batch", progress=False)


def test_group_flags_on_the_command_line(tmp_path, capsys):
    from episodelake.api import cli

    root = tmp_path / "episode"
    _batch(root, "wifi", "2026-11-30T10:00:00", 2)
    _batch(root, "wifi", "2026-11-30T10:20:00", 2)
    lake = tmp_path / "lake"
    assert cli.main(["--lake", str(lake), "import", "clawgui", str(root), "--group-by", "task-window",
                     "--window-min", "30"]) == 0
    assert len({r["group_id"] for r in Lake(lake).sql("select group_id from episodes").to_pylist()}) == 1
    assert cli.main(["--lake", str(lake), "import", "clawgui", str(root), "--window-min", "0"]) == 1
    assert "--window-min" in capsys.readouterr().err


def test_drop_in_episodes_get_group_ids_and_anchor_keys(tmp_path, monkeypatch):
    lake_dir = tmp_path / "lake"
    monkeypatch.setenv("ELAKE_LAKE", str(lake_dir))
    ids = [f"3f2c9a1e-0000-4000-8000-00000000001{k}" for k in range(3)]
    for k, eid in enumerate(ids):  # one batch: three rollouts of one task, in lock-step
        for n in range(2):
            clawgui.save_episode_to_json([base64.b64encode(screenshot(n if n == 0 else 10 + k)).decode()],
                                         [response()], "open wifi", "Turn on Wi-Fi", eid, step_number=n)
    for k, eid in enumerate(ids):
        clawgui.update_episode_result("open wifi", eid, float(k == 0), "", float(k == 0), 2)
    clawgui.save_episode_to_json([base64.b64encode(screenshot(0)).decode()], [response()],
                                 "set alarm", "Set an alarm", "other-task-episode", step_number=0)
    dropin.close_recorders()
    lake = Lake(lake_dir)
    groups = {r["episode_id"]: r["group_id"] for r in lake.sql("select episode_id, group_id from episodes").to_pylist()}
    assert len({groups[e] for e in ids}) == 1 and None not in groups.values()
    assert groups["other-task-episode"] != groups[ids[0]]
    # the keys are derived after the commit: by the recorder's background worker, or (for
    # steps it had not reached when the process closed) by the trainer before its advantages
    enrich_anchor_keys(lake, list(groups))
    assert lake.sql("select count(*) n from steps where anchor_key is null").to_pylist() == [{"n": 0}]
    rows = {(r["episode_id"], r["step"]): r for r in _advantages(lake).table.to_pylist()}
    assert {rows[(e, 0)]["anchor_group_size"] for e in ids} == {3}


@pytest.mark.parametrize("value, worker", [(None, True), ("1", True), ("0", False), ("off", False)])
def test_the_drop_in_recorder_enriches_in_the_background_unless_told_not_to(tmp_path, monkeypatch, value, worker):
    monkeypatch.setenv("ELAKE_LAKE", str(tmp_path / "lake"))
    if value is not None:
        monkeypatch.setenv("ELAKE_RECORDER_ENRICH", value)
    clawgui.save_episode_to_json([base64.b64encode(screenshot(0)).decode()], [response()],
                                 "open wifi", "Turn on Wi-Fi", "ep-env", step_number=0)
    (recorder,) = dropin._recorders.values()
    assert (recorder.enricher is not None) is worker
    dropin.close_recorders()
    assert Lake(tmp_path / "lake").steps("ep-env").num_rows == 1  # recorded either way


def test_a_wrong_enrich_setting_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("ELAKE_LAKE", str(tmp_path / "lake"))
    monkeypatch.setenv("ELAKE_RECORDER_ENRICH", "sometimes")
    with pytest.raises(InvalidInput, match=r"\$ELAKE_RECORDER_ENRICH: 'sometimes'"):
        clawgui.save_episode_to_json([base64.b64encode(screenshot(0)).decode()], [response()],
                                     "open wifi", "Turn on Wi-Fi", "ep-env", step_number=0)


# -- export keeps the reference viewer working ---------------------------------------------------
def test_export_of_a_lost_screenshot_writes_a_path_that_does_not_exist(tmp_path):
    import os

    root = tmp_path / "episode"
    folder = write_reference_episode(root, "gap", "ep-gap", steps=3, null_image_at=1)
    doc = json.loads((folder / "episode.json").read_text())
    del doc["episode"][2]["step_reward_reason"]
    doc["episode"][0].pop("step_reward"), doc["episode"][0].pop("step_reward_reason")
    (folder / "episode.json").write_text(json.dumps(doc))
    lake = Lake(tmp_path / "lake")
    importer.import_clawgui(lake, root, progress=False)
    out = tmp_path / "out"
    stale = out / "gap" / "ep-gap" / "images" / "step_0001.png"  # left by an earlier export
    stale.parent.mkdir(parents=True)
    stale.write_bytes(screenshot(5))
    clawgui_folders.export_clawgui(lake, out, progress=False)
    records = json.loads((out / "gap" / "ep-gap" / "episode.json").read_text())["episode"]
    paths = [r["image_path"] for r in records]
    assert all(isinstance(p, str) and os.path.isabs(p) for p in paths)  # os.path.exists(None) raises
    assert [os.path.exists(p) for p in paths] == [True, False, True]
    assert paths[1] == str((out / "gap" / "ep-gap" / "images" / "step_0001.png").resolve())
    assert "step_reward" not in records[0] and "step_reward_reason" not in records[0]
    assert records[1]["step_reward_reason"] == "progress"
    assert records[2]["step_reward"] == 1.0 and "step_reward_reason" not in records[2]
    # and it imports back: the lost screenshot stays lost, flagged
    again = Lake(tmp_path / "again")
    report = importer.import_clawgui(again, out, progress=False)
    assert report.episodes == 1 and len(report.missing_images) == 1
    assert [s for s, _ in again.images("ep-gap")] == [0, 2]


def test_derived_group_ids_are_valid_ids_and_never_shared_by_two_tasks():
    from datetime import UTC, datetime

    from episodelake.lake.storage.layout import check_id

    names = ["a b/c", "a_b_c", "..", "", None, "日本語", "設定", "x" * 500, "-lead", "wifi_on"]
    at = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    for group_by in ("task-window", "task"):
        deriver = importer.GroupDeriver(group_by)
        ids = [deriver.assign(name, at)[0] for name in names]
        assert all(check_id(i, "group_id") for i in ids)
        assert len(set(ids)) == len(names) - 1  # "" and None both mean the reference's unknown_task
