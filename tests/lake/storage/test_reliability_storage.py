"""The lake's promises under stress, on real Lance datasets: a disk that fills up, readers and
tags during writes, maintenance during writes, long curation sessions through the server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from episodelake.lake import Lake, LakeWriter, WriterOptions
from episodelake.lake.storage import tables
from episodelake.lake.storage.spool import SpoolWriteError
from tests.factories import child_env, screenshot
from tests.waiting import wait_for

ORPHANS = ("select count(*) from steps s left join episodes e using (episode_id) "
           "where e.episode_id is null")


def _episode(eid: str, status: str = "running") -> dict:
    return {"episode_id": eid, "task_name": "t", "status": status,
            "created_at": datetime(2026, 1, 1, tzinfo=UTC)}


def _step(eid: str, n: int, image: bytes | None = None) -> dict:
    return {"episode_id": eid, "step": n, "image": image or screenshot(n % 7), "action_type": "click"}


def _count(lake: Lake, query: str) -> int:
    return lake.sql(query).column(0)[0].as_py()


# -- a full disk ---------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 24 MB tmpfs mounted for the test (needs root and a kernel that lets us mount)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk, leave: int):
    """Take all but `leave` bytes of the disk with one file; returns its path."""
    filler = disk / "filler"
    with open(filler, "wb") as fh:
        room = shutil.disk_usage(disk).free - leave
        while room > 0:
            chunk = min(room, 1 << 20)
            fh.write(b"\0" * chunk)
            room -= chunk
    return filler


def test_full_disk_refuses_rows_cleanly_and_recovers_by_itself(small_disk, caplog):
    """Fill the disk under a live writer: spool writes fail with a clear error and record
    nothing, commits fail and are retried; once space returns the same writer carries on
    (no permanent error), and every acknowledged step ends up in the lake exactly once."""
    lake = Lake(small_disk / "lake")
    image = os.urandom(40_000)  # incompressible, like a screenshot
    w = lake.writer(WriterOptions(batch_rows=6, max_age_s=0.2))
    w.append("episodes", _episode("e1"))
    filler = _fill(small_disk, leave=700_000)

    acknowledged, errors, step = [], [], 0
    while len(errors) < 5 and step < 500:
        try:
            w.append("steps", _step("e1", step, image))
            acknowledged.append(step)
            step += 1  # a failed step is sent again with the same number, as a caller would
        except SpoolWriteError as exc:
            errors.append(str(exc))
            time.sleep(0.1)
    assert len(errors) == 5, "the disk never filled up"
    assert all(e.startswith("spool: could not write") and "free" in e and "not recorded" in e
               for e in errors), errors[0]
    time.sleep(1.0)  # the background commit keeps failing on the full disk, without giving up

    filler.unlink()
    for n in range(step, step + 30):
        w.append("steps", _step("e1", n, image))
        acknowledged.append(n)
    w.append("episodes", _episode("e1", "finished"))
    w.close()  # commits the rest: no "a background commit failed" left behind

    assert any("commit" in r.getMessage() and "retr" in r.getMessage() for r in caplog.records), \
        "no Lance commit failed on the full disk: the test did not exercise that path"
    reopened = Lake(lake.path)
    assert reopened.recover()["problems"] == {}
    got = reopened.sql("select step from steps order by step").column(0).to_pylist()
    assert got == acknowledged
    assert reopened.episode("e1")["status"] == "finished"
    LakeWriter(lake.path).close()  # a new writer opens the lake


def test_freeing_less_than_the_backlog_still_drains_it(small_disk):
    """The disk fills while the writer's spool holds a backlog of uncommitted batches; then
    only a little space comes back, much less than the backlog. The writer commits a batch or
    two at a time, each commit letting go of its spool segment, so the room freed by one
    batch makes room for the next: the whole backlog ends in the lake, each step once."""
    lake = Lake(small_disk / "lake")
    image = os.urandom(40_000)
    w = lake.writer(WriterOptions(batch_rows=6, max_age_s=0.2))
    w.append("episodes", _episode("e1"))
    spares = [small_disk / f"spare{n}" for n in range(12)]  # the little that will come back
    for spare in spares:
        spare.write_bytes(b"\0" * 100_000)
    filler = _fill(small_disk, leave=4_000_000)
    acknowledged, step, refused = [], 0, 0
    while refused < 3 and step < 2000:
        try:
            w.append("steps", _step("e1", step, image))
            acknowledged.append(step)
            step += 1
        except SpoolWriteError:
            refused += 1
            time.sleep(0.2)
    assert refused == 3, "the disk never filled up"
    backlog = sum(f.stat().st_size for f in (small_disk / "lake").rglob("*") if "spool" in str(f) and f.is_file())
    # how much was committed before the disk filled varies (the backlog was 1.4-4 MB in runs),
    # so free at most 1/1.2 of it, and 0.9-1.2 MB: about four batches, since a flush gives
    # up when the next two batches' uploads do not fit in what is free
    freed = min(len(spares), int(backlog / 1.2 / 100_000))
    assert freed >= 9, f"the backlog ({backlog} bytes) is too small for the test to mean anything"
    for spare in spares[:freed]:
        spare.unlink()
    w.append("episodes", _episode("e1", "finished"))
    w.close()
    reopened = Lake(lake.path)
    assert reopened.recover()["problems"] == {}
    assert reopened.sql("select step from steps order by step").column(0).to_pylist() == acknowledged
    filler.unlink()


def test_recover_on_a_full_disk_says_how_much_space_it_needs(small_disk):
    lake = Lake(small_disk / "lake")
    w = LakeWriter(lake.path, WriterOptions(batch_rows=10_000, max_age_s=600))
    image = os.urandom(50_000)
    for n in range(40):  # ~2 MB of acknowledged rows in the spool
        w.append("steps", _step("e1", n, image))
    w._stop.set()  # a crash: the lock goes, nothing was committed
    w._spool._lock.close()
    filler = _fill(small_disk, leave=300_000)

    with pytest.raises(tables.StorageFull, match=r"needs about [\d.]+ MB free .* MB are free"):
        Lake(lake.path).recover()
    LakeWriter(lake.path).close()  # another writer still opens; the dead one's rows wait
    filler.unlink()
    report = Lake(lake.path).recover()
    assert report["rows_replayed"] == 40 and report["problems"] == {}
    assert _count(lake, "select count(distinct step) from steps") == 40


# -- readers and tags see every step with its episode --------------------------------------

def test_a_full_steps_batch_commits_its_episode_row_first(lake):
    with lake.writer(WriterOptions(batch_rows=5, max_age_s=600)) as w:
        w.append("episodes", _episode("e1"))
        for n in range(5):  # the fifth fills the steps batch: the writer's thread commits it
            w.append("steps", _step("e1", n))
        # without a flush or close, not waiting for the age
        wait_for(lambda: _count(lake, "select count(*) from steps") >= 5, 20, what="the full batch's commit")
        assert _count(lake, "select count(*) from steps") == 5
        assert _count(lake, ORPHANS) == 0


def test_steps_committed_by_age_take_a_younger_episode_row_with_them(lake):
    with lake.writer(WriterOptions(batch_rows=10_000, max_age_s=0.6)) as w:
        w.append("episodes", _episode("e1"))
        w.flush()
        for n in range(3):
            w.append("steps", _step("e1", n))
        time.sleep(0.3)
        w.append("episodes", _episode("e2"))  # younger than the steps batch
        w.append("steps", _step("e2", 0))
        wait_for(lambda: _count(lake, "select count(*) from steps") >= 4, 20, what="the aged batch's commit")
        assert _count(lake, ORPHANS) == 0


def test_readers_and_tags_during_writes_never_see_a_step_without_its_episode(tmp_path):
    path = tmp_path / "lake"
    Lake(path)
    stop = threading.Event()
    failures: list[str] = []

    def record() -> None:
        try:
            with LakeWriter(path, WriterOptions(batch_rows=3, max_age_s=0.05)) as w:
                for e in range(40):
                    eid = f"e{e}"
                    w.append("episodes", _episode(eid))
                    for n in range(4):
                        w.append("steps", _step(eid, n))
                    w.append("episodes", _episode(eid, "finished"))
        except BaseException as exc:  # surfaced by the assertion below
            failures.append(repr(exc))
        finally:
            stop.set()

    writer = threading.Thread(target=record)
    reader = Lake(path)
    writer.start()
    polls, tags = [], []
    while not stop.is_set():
        polls.append(_count(reader, ORPHANS))
        if len(polls) % 5 == 0:
            name = f"t{len(tags)}"
            reader.create_tag(name)
            tags.append(name)
    writer.join()
    assert not failures, failures
    assert len(polls) >= 10 and len(tags) >= 2
    assert set(polls) == {0}
    for name in tags:
        assert _count(reader.at(name), ORPHANS) == 0, name
    assert _count(reader, "select count(*) from steps") == 160


def test_cached_snapshots_stay_consistent(tmp_path):
    """With `refresh_s` caching, a table is never served from a check older than the check
    of a table resolved before it, so the pinned versions still agree."""
    path = tmp_path / "lake"
    reader = Lake(path, refresh_s=30)
    assert _count(reader, ORPHANS) == 0  # caches every table
    with LakeWriter(path, WriterOptions(batch_rows=2, max_age_s=600)) as w:
        w.append("episodes", _episode("e1"))
        w.append_rows("steps", [_step("e1", 0), _step("e1", 1)])
    reader.invalidate("steps")  # steps checked anew, episodes still cached from before
    assert _count(reader, "select count(*) from steps") == 2
    assert _count(reader, ORPHANS) == 0


# -- maintenance during writes -------------------------------------------------------------

RECORDING_PROCESS = textwrap.dedent(
    """
    from datetime import UTC, datetime
    from tests.factories import screenshot
    from episodelake.lake import LakeWriter, WriterOptions
    with LakeWriter({lake!r}, WriterOptions(batch_rows=8, max_age_s=0.1)) as w:
        for e in range({episodes}):
            eid = "w{worker}-" + str(e)
            row = {{"episode_id": eid, "task_name": "t", "status": "running",
                    "created_at": datetime(2026, 1, 1, tzinfo=UTC)}}
            w.append("episodes", row)
            for n in range({steps}):
                w.append("steps", {{"episode_id": eid, "step": n, "image": screenshot(n),
                                    "action_type": "click"}})
            w.append("episodes", {{**row, "status": "finished"}})
    """
)


def test_optimize_while_writers_record_finishes_and_loses_nothing(lake):
    """Compaction, index builds and pruning race writers' appends and episode upserts:
    Lance's "Rewrite preempted" conflicts are retried, never raised."""
    episodes, steps = 30, 6
    procs = [subprocess.Popen(
        [sys.executable, "-c", RECORDING_PROCESS.format(
            lake=str(lake.path), worker=k, episodes=episodes, steps=steps)],
        stderr=subprocess.PIPE, text=True, env=child_env()) for k in range(2)]
    runs = 0
    while runs < 3 or any(p.poll() is None for p in procs):
        lake.optimize(prune_older_than=timedelta(days=7))
        runs += 1
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    lake.optimize(prune_older_than=timedelta(0))
    got = lake.sql("select count(*) n, count(distinct (episode_id, step)) d from steps").to_pylist()[0]
    assert got == {"n": 2 * episodes * steps, "d": 2 * episodes * steps}
    assert _count(lake, "select count(*) from episodes where status = 'finished'") == 2 * episodes
    assert _count(lake, ORPHANS) == 0


def test_commit_conflicts_are_told_apart_from_other_os_errors():
    conflict = OSError("Retryable commit conflict for version 6: This Rewrite transaction was "
                       "preempted by concurrent transaction Delete at version 6. Please retry.")
    assert tables.is_commit_conflict(conflict)
    assert tables.is_commit_conflict(OSError("Too many concurrent writers. Please retry later"))
    full = OSError("LanceError(IO): failed to commit: No space left on device (os error 28)")
    assert not tables.is_commit_conflict(full)
    tries = []

    def fails_full():
        tries.append(1)
        raise full

    with pytest.raises(OSError, match="No space"):
        tables.retry_commit("append steps", fails_full)
    assert len(tries) == 1  # a full disk is not retried twelve times
