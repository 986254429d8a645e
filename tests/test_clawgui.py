"""ClawGUI-RL compatibility: drop-in functions, folder import/export/watch on real files."""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path

import pytest
from factories import response, screenshot

from episodelake.collectors import clawgui
from episodelake.lake import Lake


def write_reference_episode(root: Path, task: str, episode_id: str, steps: int, *, finished=True,
                            null_image_at: int | None = None) -> Path:
    """An episode folder exactly as the reference writes it (absolute image paths)."""
    folder = root / clawgui.task_dir_name(task) / episode_id
    (folder / "images").mkdir(parents=True)
    records = []
    for n in range(steps):
        path = folder / "images" / f"step_{n:04d}.png"
        path.write_bytes(screenshot(n))
        records.append({"step": n, "image_path": None if n == null_image_at else str(path.resolve()),
                        "model_response": response("click", coordinate=[10 * n, 20]),
                        "timestamp": f"2026-11-30T10:00:{n:02d}.000001",
                        "step_reward": 1.0, "step_reward_reason": "progress"})
    meta = {"task_name": task, "task_goal": f"do {task}", "episode_id": episode_id,
            "created_at": "2026-11-30T10:00:00.000001"}
    if finished:
        meta.update(success=True, eval_score=1.0, eval_reason="", episode_reward=1.5,
                    episode_length=steps, finished_at="2026-11-30T10:01:00.000001")
    (folder / "episode.json").write_text(json.dumps({"meta_data": meta, "episode": records}))
    return folder


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
    clawgui.close_recorders()
    lake = Lake(lake_dir)
    ep = lake.episode(eid)
    assert ep["success"] is True and ep["episode_reward"] == 1.5 and ep["episode_length"] == 3
    assert [s["step_reward"] for s in lake.steps(eid).to_pylist()] == [1.0, 1.0, 1.0]


def test_import_twice_gives_the_same_rows(tmp_path):
    root = tmp_path / "episode"
    for k in range(3):
        write_reference_episode(root, f"task {k}", f"ep-{k}", steps=4)
    lake = Lake(tmp_path / "lake")
    first = clawgui.import_clawgui(lake, root, progress=False)
    counts = lake.sql("select (select count(*) from episodes) e, (select count(*) from steps) s").to_pylist()
    second = clawgui.import_clawgui(lake, root, progress=False)
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
    report = clawgui.import_clawgui(lake, root, progress=False)
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
    clawgui.import_clawgui(lake, root, progress=False)
    out = tmp_path / "out"
    assert clawgui.export_clawgui(lake, out, progress=False) == 1
    doc = json.loads((out / "a_task" / "ep-1" / "episode.json").read_text())
    assert doc["meta_data"]["success"] is True and len(doc["episode"]) == 3
    assert Path(doc["episode"][2]["image_path"]).read_bytes() == screenshot(2)
    again = Lake(tmp_path / "lake2")
    clawgui.import_clawgui(again, out, progress=False)
    cols = "step, model_response, step_reward, image_sha256"
    assert again.sql(f"select {cols} from steps order by step").to_pylist() == \
        lake.sql(f"select {cols} from steps order by step").to_pylist()


def test_watch_ingests_a_growing_folder(tmp_path):
    root = tmp_path / "episode"
    root.mkdir()
    lake = Lake(tmp_path / "lake")
    stop = threading.Event()
    result = {}
    t = threading.Thread(target=lambda: result.update(r=clawgui.watch_clawgui(lake, root, interval_s=0.1, stop=stop)))
    t.start()
    try:
        write_reference_episode(root, "live", "ep-live", steps=2, finished=False)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and lake.dataset("steps").count_rows() < 2:
            time.sleep(0.05)
        folder = root / "live" / "ep-live"
        doc = json.loads((folder / "episode.json").read_text())
        (folder / "images" / "step_0002.png").write_bytes(screenshot(2))
        doc["episode"].append({"step": 2, "image_path": str(folder / "images" / "step_0002.png"),
                               "model_response": response(), "timestamp": "2026-11-30T10:00:05"})
        doc["meta_data"].update(success=False, eval_score=0.0, eval_reason="timeout", episode_reward=0.0,
                                episode_length=3, finished_at="2026-11-30T10:01:00")
        time.sleep(0.05)
        (folder / "episode.json").write_text(json.dumps(doc))
        while time.monotonic() < deadline and (lake.dataset("steps").count_rows() < 3
                                               or lake.episode("ep-live")["status"] != "finished"):
            time.sleep(0.05)
    finally:
        stop.set()
        t.join()
    assert lake.dataset("steps").count_rows() == 3
    assert lake.episode("ep-live")["eval_reason"] == "timeout"


def test_import_of_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(Exception, match="is not a folder of ClawGUI episodes"):
        clawgui.import_clawgui(Lake(tmp_path / "lake"), tmp_path / "nope", progress=False)


def test_an_episode_with_a_lost_screenshot_still_reads_and_exports(tmp_path):
    root = tmp_path / "episode"
    write_reference_episode(root, "gap", "ep-gap", steps=3, null_image_at=1)
    lake = Lake(tmp_path / "lake")
    clawgui.import_clawgui(lake, root, progress=False)
    assert [step for step, _ in lake.images("ep-gap")] == [0, 2]
    with pytest.raises(Exception, match="has no screenshot"):
        lake.image("ep-gap", 1)
    clawgui.export_clawgui(lake, tmp_path / "out", progress=False)
    doc = json.loads((tmp_path / "out" / "gap" / "ep-gap" / "episode.json").read_text())
    assert [r["image_path"] is None for r in doc["episode"]] == [False, True, False]
