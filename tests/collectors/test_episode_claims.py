"""Episode ids are keys across processes: a reused id never rewrites a stored episode.

Real lakes in tmp_path, real processes (spawned: Lance's runtime does not survive a fork).
"""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest

from episodelake.collectors import clawgui
from episodelake.collectors.clawgui import dropin
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake, WriterOptions
from episodelake.lake.storage.errors import Conflict
from tests.factories import race, response, screenshot

#: Rows stay in the spool until close: what a crash leaves behind.
NEVER_COMMIT = WriterOptions(batch_rows=1_000_000, max_age_s=3600)


def _stored(lake: Lake, episode_id: str) -> tuple[list[dict], list[int]]:
    lake.invalidate()
    episodes = lake.sql(f"select * from episodes where episode_id = '{episode_id}'").to_pylist()
    steps = lake.sql(f"select step from steps where episode_id = '{episode_id}' order by step")
    return episodes, steps.column(0).to_pylist()


# -- two processes, one id -------------------------------------------------------------------
def _race(path: str, episode_ids: list[str], barrier, results, resume: bool = False) -> None:
    rec = Recorder(path, anchor=None, image_checks="structure")
    try:
        for episode_id in episode_ids:
            barrier.wait()
            try:
                ep = rec.start_episode("t", "g", episode_id=episode_id, resume=resume)
            except Conflict as exc:
                results.put((episode_id, os.getpid(), f"conflict: {exc}"))
                continue
            ep.log_step(screenshot(1), response())
            ep.log_step(screenshot(2), response())
            ep.finish(success=True, eval_score=1.0)
            results.put((episode_id, os.getpid(), "won"))
    finally:
        rec.close()


def _race_to_resume(path: str, episode_ids: list[str], barrier, results) -> None:
    _race(path, episode_ids, barrier, results, resume=True)


def test_processes_racing_to_start_one_id_end_with_exactly_one_winner(lake):
    ids = [f"race-{n}" for n in range(4)]
    outcomes = race(_race, str(lake.path), ids=ids)
    for episode_id in ids:
        mine = [outcome for eid, _, outcome in outcomes if eid == episode_id]
        assert mine.count("won") == 1, mine
        assert all(o == "won" or o.startswith("conflict: ") for o in mine)
        episodes, steps = _stored(lake, episode_id)
        assert len(episodes) == 1 and episodes[0]["status"] == "finished"
        assert episodes[0]["success"] is True and episodes[0]["episode_length"] == 2
        assert steps == [0, 1]


def test_processes_racing_to_resume_one_episode_never_number_a_step_twice(lake):
    with Recorder(lake, anchor=None) as rec:  # a run that stopped after two steps
        for episode_id in ("half-0", "half-1"):
            ep = rec.start_episode("t", "g", episode_id=episode_id)
            ep.log_step(screenshot(1), response())
            ep.log_step(screenshot(2), response())
    outcomes = race(_race_to_resume, str(lake.path), ids=["half-0", "half-1"])
    for episode_id in ("half-0", "half-1"):
        mine = [outcome for eid, _, outcome in outcomes if eid == episode_id]
        assert mine.count("won") == 1, mine  # the others were refused: held, then finished
        episodes, steps = _stored(lake, episode_id)
        assert steps == [0, 1, 2, 3] and episodes[0]["episode_length"] == 4


# -- restarts ---------------------------------------------------------------------------------
def _record(lake, episode_id: str, steps: int, *, finish: bool = True, **result) -> None:
    with Recorder(lake, anchor=None) as rec:
        ep = rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id=episode_id, group_id="g1")
        for n in range(steps):
            ep.log_step(screenshot(n), response(), reward=0.5)
        if finish:
            ep.finish(**result)


def test_restart_reusing_a_finished_id_is_a_conflict_and_leaves_history_untouched(lake):
    _record(lake, "ep-1", 2, success=True, eval_score=1.0, eval_reason="wifi is on")
    before = _stored(lake, "ep-1")
    with Recorder(lake, anchor=None) as rec:  # a restarted process
        with pytest.raises(Conflict, match="finished.*never reset"):
            rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id="ep-1")
        with pytest.raises(Conflict, match="finished.*never reset"):
            rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id="ep-1", resume=True)
    assert _stored(lake, "ep-1") == before
    episodes, steps = before
    assert episodes[0]["status"] == "finished" and episodes[0]["success"] is True
    assert episodes[0]["eval_score"] == 1.0 and steps == [0, 1]


def test_resume_continues_numbering_after_the_last_stored_step(lake):
    _record(lake, "ep-2", 3, finish=False)  # the process stopped mid-episode
    with Recorder(lake, anchor=None) as rec:
        with pytest.raises(Conflict, match="resume=True"):
            rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id="ep-2")
        ep = rec.start_episode("wifi_on", "ignored on resume", episode_id="ep-2", resume=True)
        assert ep.log_step(screenshot(7), response(), reward=1.0).step == 3
        with pytest.raises(Conflict, match="already has step 1"):
            ep.log_step(screenshot(8), response(), step=1)
        ep.finish(success=True)
    episodes, steps = _stored(lake, "ep-2")
    assert steps == [0, 1, 2, 3] and len(episodes) == 1
    row = episodes[0]
    assert row["status"] == "finished" and row["episode_length"] == 4
    assert row["episode_reward"] == pytest.approx(2.5)  # the stored steps' rewards count too
    assert row["task_goal"] == "Turn on Wi-Fi" and row["group_id"] == "g1"  # the stored row is kept


def test_resume_of_an_aborted_episode_and_of_another_task(lake):
    with pytest.raises(RuntimeError):
        with Recorder(lake, anchor=None) as rec, rec.start_episode("t", "g", episode_id="ep-3") as ep:
            ep.log_step(screenshot(1), response())
            raise RuntimeError("device went away")
    assert _stored(lake, "ep-3")[0][0]["status"] == "aborted"
    with Recorder(lake, anchor=None) as rec:
        with pytest.raises(Conflict, match="task_name"):
            rec.start_episode("other", "g", episode_id="ep-3", resume=True)
        ep = rec.start_episode("t", "g", episode_id="ep-3", resume=True)
        rec.flush()
        assert _stored(lake, "ep-3")[0][0]["status"] == "running"
        ep.log_step(screenshot(2), response())
        ep.finish(success=False)
    episodes, steps = _stored(lake, "ep-3")
    assert steps == [0, 1] and episodes[0]["status"] == "finished" and episodes[0]["finished_at"]


def test_resume_with_an_unknown_id_starts_the_episode(lake):
    with Recorder(lake, anchor=None) as rec:
        ep = rec.start_episode("t", "g", episode_id="fresh", resume=True)
        assert ep.log_step(screenshot(1), response()).step == 0
    assert _stored(lake, "fresh")[1] == [0]


def test_an_episode_held_by_a_live_recorder_is_refused_to_every_other(lake):
    first, second = Recorder(lake, anchor=None), Recorder(lake, anchor=None)
    try:
        ep = first.start_episode("t", "g", episode_id="held")
        ep.log_step(screenshot(1), response())
        for resume in (False, True):
            with pytest.raises(Conflict, match="another recorder"):
                second.start_episode("t", "g", episode_id="held", resume=resume)
        with pytest.raises(Conflict, match="this recorder"):
            first.start_episode("t", "g", episode_id="held")
        ep.finish(success=True)
        # finished, but its rows may still wait in the first recorder's writer: still held
        with pytest.raises(Conflict, match="another recorder"):
            second.start_episode("t", "g", episode_id="held", resume=True)
        first.flush()
        with pytest.raises(Conflict, match="finished"):
            second.start_episode("t", "g", episode_id="held", resume=True)
    finally:
        first.close()
        second.close()
    assert _stored(lake, "held")[1] == [0]


def _crash_mid_episode(path: str, ready) -> None:
    rec = Recorder(path, anchor=None, options=NEVER_COMMIT)
    ep = rec.start_episode("t", "g", episode_id="crashed")
    for n in range(3):
        ep.log_step(screenshot(n), response(), reward=1.0)  # acknowledged: in the spool only
    ready.set()
    os.kill(os.getpid(), signal.SIGKILL)


def test_resume_after_a_crash_first_replays_the_dead_recorders_spool(lake):
    with Recorder(lake, anchor=None) as rec:  # opened before the crash: its writer replayed nothing
        ctx = multiprocessing.get_context("spawn")
        ready = ctx.Event()
        proc = ctx.Process(target=_crash_mid_episode, args=(str(lake.path), ready))
        proc.start()
        proc.join(timeout=300)
        assert ready.is_set() and proc.exitcode == -signal.SIGKILL
        assert _stored(lake, "crashed")[1] == []  # the three steps wait in the dead spool
        ep = rec.start_episode("t", "g", episode_id="crashed", resume=True)
        assert ep.log_step(screenshot(9), response(), reward=1.0).step == 3
        ep.finish(success=True)
    episodes, steps = _stored(lake, "crashed")
    assert steps == [0, 1, 2, 3]
    assert episodes[0]["episode_length"] == 4 and episodes[0]["episode_reward"] == 4.0


# -- the ClawGUI drop-in across a restart ---------------------------------------------------------
def test_drop_in_resumes_its_episode_across_recorder_instances(lake, monkeypatch):
    monkeypatch.delenv("ELAKE_LAKE", raising=False)
    save_dir = str(lake.path)

    def save(step: int) -> None:
        clawgui.save_episode_to_json([screenshot(step)], [response()], "wifi_on", "Turn on Wi-Fi",
                                     "claw-1", save_dir=save_dir, step_number=step, step_reward=1.0)

    try:
        save(0)
        save(1)
        dropin.close_recorders()  # the training process restarts: a new recorder instance
        save(2)
        with pytest.raises(Conflict, match="already has step 2"):
            save(2)
        assert clawgui.update_episode_result("wifi_on", "claw-1", 1.0, "done", 3.0, 3, save_dir=save_dir)
        assert clawgui.update_episode_result("wifi_on", "claw-1", 1.0, "done", 3.0, 3, save_dir=save_dir)
        with pytest.raises(Conflict, match="finished"):
            save(3)
        dropin.close_recorders()  # and restarts again
        with pytest.raises(Conflict, match="finished"):
            save(3)  # a step after the result would no longer match it
        assert clawgui.update_episode_result("wifi_on", "claw-1", 1.0, "done", 3.0, 3, save_dir=save_dir)
        with pytest.raises(Conflict, match="finished"):
            clawgui.update_episode_result("wifi_on", "claw-1", 0.0, "failed", 0.0, 3, save_dir=save_dir)
        assert not clawgui.update_episode_result("wifi_on", "nobody", 1.0, "", 0.0, 0, save_dir=save_dir)
    finally:
        dropin.close_recorders()
    episodes, steps = _stored(lake, "claw-1")
    assert steps == [0, 1, 2] and len(episodes) == 1
    row = episodes[0]
    assert row["status"] == "finished" and row["success"] is True and row["eval_score"] == 1.0
    assert row["eval_reason"] == "done" and row["episode_length"] == 3
