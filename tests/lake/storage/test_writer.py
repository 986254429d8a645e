"""The crash-safe writer on real Lance datasets: batching, replay, kills, concurrency."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time

from episodelake.lake import Lake, LakeWriter, WriterOptions
from episodelake.lake.storage import tables
from episodelake.lake.storage.layout import spool_root
from tests.factories import child_env, screenshot
from tests.waiting import wait_for


def _step(eid: str, n: int) -> dict:
    return {"episode_id": eid, "step": n, "image": screenshot(n), "action_type": "click"}


def test_batches_commit_many_rows_per_version(lake):
    with lake.writer(WriterOptions(batch_rows=50, max_age_s=60)) as w:
        for n in range(120):
            w.append("steps", _step("e1", n))
        # full batches commit on the writer's own thread
        wait_for(lambda: w.commits > 0, 30, what="a full batch's commit")
        commits_before_close = w.commits
    # one commit per full batch at most (the committer may take two batches at once); the
    # rest at close, never a commit per row
    assert 1 <= commits_before_close <= 2
    assert lake.sql("select count(*) from steps").column(0)[0].as_py() == 120
    assert len(lake.dataset("steps").versions()) <= 4


def test_age_commits_without_flush(lake):
    w = lake.writer(WriterOptions(batch_rows=10_000, max_age_s=0.2))
    w.append("steps", _step("e1", 0))
    wait_for(lambda: lake.dataset("steps").count_rows() > 0, 10, what="the aged batch's commit")
    assert lake.dataset("steps").count_rows() == 1
    w.close()


def test_spool_of_dead_writer_is_replayed_once(lake):
    w = LakeWriter(lake.path, WriterOptions(batch_rows=10_000, max_age_s=60))
    for n in range(5):
        w.append("steps", _step("e1", n))
    # simulate a crash: the lock is released without a commit
    w._stop.set()
    w._spool._lock.close()
    assert lake.dataset("steps").count_rows() == 0
    with LakeWriter(lake.path) as w2:
        assert w2.replayed == 5
    assert lake.sql("select count(*), count(distinct step) from steps").to_pylist() == [
        {"count_star()": 5, "count(DISTINCT step)": 5}
    ]
    # replaying again (e.g. crash after commit, before the spool was deleted) adds nothing
    assert not any(spool_root(lake.path).iterdir())


def test_replay_after_commit_does_not_duplicate(lake, tmp_path):
    """A crash between the Lance commit and the spool delete: the replay must dedupe."""
    import shutil

    w = LakeWriter(lake.path, WriterOptions(batch_rows=10_000, max_age_s=60))
    for n in range(3):
        w.append("steps", _step("e1", n))
    segment = next(w._spool.dir.glob("*.arrows"))
    keep = tmp_path / "copy.arrows"
    shutil.copy(segment, keep)
    w.flush()
    shutil.copy(keep, segment)  # the segment survived the commit
    w._stop.set()
    w._spool._lock.close()
    with LakeWriter(lake.path) as w2:
        assert w2.replayed == 3
    assert lake.dataset("steps").count_rows() == 3


WRITER_CHILD = textwrap.dedent(
    """
    from tests.factories import screenshot
    from episodelake.lake import LakeWriter, WriterOptions
    w = LakeWriter({lake!r}, WriterOptions(batch_rows=7, max_age_s=60))
    for n in range(10_000):
        w.append("steps", {{"episode_id": "killed", "step": n, "image": screenshot(n % 5),
                            "action_type": "click"}})
        print(n, flush=True)  # acknowledged
    """
)


def test_sigkill_mid_episode_keeps_every_acknowledged_step(lake):
    code = WRITER_CHILD.format(lake=str(lake.path))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=child_env())
    acknowledged = -1
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 60:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for line in proc.stdout.read().split():  # acknowledgements already in the pipe
        acknowledged = int(line)
    reopened = Lake(lake.path)
    assert reopened.recover()["problems"] == {}
    rows = reopened.sql(
        "select count(*) n, count(distinct step) d, min(step) lo, max(step) hi from steps "
        "where episode_id = 'killed'"
    ).to_pylist()[0]
    assert rows["n"] == rows["d"]  # exactly once
    assert rows["lo"] == 0 and rows["hi"] >= acknowledged
    assert rows["n"] == rows["hi"] + 1


CONCURRENT_CHILD = textwrap.dedent(
    """
    from tests.factories import screenshot
    from episodelake.lake import LakeWriter, WriterOptions
    image = screenshot({worker})
    with LakeWriter({lake!r}, WriterOptions(batch_rows=25, max_age_s=0.5)) as w:
        for n in range(500):
            w.append("steps", {{"episode_id": "w{worker}", "step": n, "image": image,
                                "action_type": "click"}})
    """
)


def test_four_processes_write_one_lake(lake):
    procs = [
        subprocess.Popen([sys.executable, "-c", CONCURRENT_CHILD.format(
            lake=str(lake.path), worker=k)], stderr=subprocess.PIPE, text=True, env=child_env())
        for k in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    got = lake.sql(
        "select count(*) n, count(distinct (episode_id, step)) d from steps"
    ).to_pylist()[0]
    assert got == {"n": 2000, "d": 2000}




MERGER = textwrap.dedent("""
    from datetime import UTC, datetime
    import pyarrow as pa
    from episodelake.lake.storage import schema, tables
    row = {{"episode_id": "queued", "task_name": "t", "status": "running",
            "created_at": datetime(2026, 1, 1, tzinfo=UTC)}}
    tables.commit({lake!r}, "episodes", pa.Table.from_pylist([row], schema=schema.TABLES["episodes"]), "upsert")
""")


def test_a_merge_waits_for_the_one_running_on_this_machine_instead_of_racing_it(lake):
    """Merges (upserts) of one table from processes on one machine queue on a lock: racing
    instead, the loser of the commit race has merged for nothing and merges again (8 writers
    upserting their episodes on S3 lost 10-20 s that way)."""
    with tables.one_at_a_time(lake.location, "episodes"):  # as a merge in progress holds it
        proc = subprocess.Popen([sys.executable, "-c", MERGER.format(lake=str(lake.path))],
                                env=child_env(), stderr=subprocess.PIPE, text=True)
        time.sleep(2.0)
        assert proc.poll() is None, proc.stderr.read()
        assert lake.sql("select count(*) from episodes").column(0)[0].as_py() == 0
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    assert lake.sql("select count(*) from episodes where episode_id = 'queued'").column(0)[0].as_py() == 1


def test_flush_returns_after_the_callbacks_of_what_it_committed(lake):
    """A `when_committed` callback the writer's own thread is running when `flush` comes has
    done its work by the time `flush` returns (a recorder lets go of finished episodes and
    wakes their enrichment there)."""
    started, done = threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        time.sleep(0.5)
        done.set()

    w = lake.writer(WriterOptions(batch_rows=10_000, max_age_s=0.1))
    w.append("steps", _step("e1", 0))
    w.when_committed(slow)
    assert started.wait(10)  # the writer's thread committed and is inside the callback
    w.flush()
    assert done.is_set()
    w.close()
