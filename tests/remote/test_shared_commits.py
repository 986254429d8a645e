"""Writer processes of one machine share their commits of `episodes` and `_claims`
(`group_commit.together`): one writer's round commits every request waiting, each request
lands exactly once, and a failed round leaves the others' requests to their writers. Then a
fleet on S3: many writer processes, every row once, nothing left in the spool."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake, WriterOptions
from episodelake.lake.storage import claims, group_commit, layout, tables
from tests.factories import child_env, response, screenshot
from tests.waiting import wait_for


def _writers(root: Path, n: int) -> list[Path]:
    folders = [root / f"writer-{k}" for k in range(n)]
    for f in folders:
        f.mkdir(parents=True)
    return folders


def test_requests_waiting_together_go_in_one_commit_each_exactly_once(tmp_path):
    folders = _writers(tmp_path / "spool", 6)
    lock = tmp_path / "locks" / "commit-t.lock"
    commits: list[list[int]] = []
    ready = threading.Barrier(len(folders))

    def commit(rows: pa.Table) -> None:
        commits.append(rows.column("v").to_pylist())
        time.sleep(0.3)  # a commit's round trips: the others arrive meanwhile

    def write(k: int) -> None:
        ready.wait()
        group_commit.together(lock, folders[k], "t", "upsert", pa.table({"v": [k]}), commit)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(len(folders))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(v for c in commits for v in c) == list(range(len(folders)))  # each once
    assert len(commits) <= 2, commits  # one round, or one and the rest that queued behind it
    assert not [p for f in folders for p in f.iterdir()]  # no request left behind


def test_a_request_still_being_written_is_left_to_its_writer(tmp_path):
    """A request is written under a hidden name and renamed into place when whole; a leader
    that took the hidden file would commit it, and its writer the renamed one again."""
    a, b = _writers(tmp_path / "spool", 2)
    lock = tmp_path / "locks" / "commit-t.lock"
    half = b / f".00000000000000000001-1-abcdef.t.upsert{group_commit.REQUEST_SUFFIX}"
    with pa.OSFile(str(half), "wb") as sink, pa.ipc.new_stream(sink, pa.schema([("v", pa.int64())])) as out:
        out.write_table(pa.table({"v": [2]}))  # whole on disk, not yet renamed
    commits: list[list[int]] = []
    group_commit.together(lock, a, "t", "upsert", pa.table({"v": [1]}),
                          lambda rows: commits.append(rows.column("v").to_pylist()))
    assert commits == [[1]] and half.exists()


def test_a_failed_round_leaves_the_other_writers_requests_to_them(tmp_path):
    a, b = _writers(tmp_path / "spool", 2)
    lock = tmp_path / "locks" / "commit-t.lock"
    stored: list[int] = []
    # b's request waits (as if b were queued behind the lock) when a's round fails
    waiting = b / f"00000000000000000001-1-abcdef.t.upsert{group_commit.REQUEST_SUFFIX}"
    with pa.OSFile(str(waiting), "wb") as sink, pa.ipc.new_stream(sink, pa.schema([("v", pa.int64())])) as out:
        out.write_table(pa.table({"v": [2]}))

    def failing(rows: pa.Table) -> None:
        raise OSError("the store went away")

    with pytest.raises(OSError, match="went away"):
        group_commit.together(lock, a, "t", "upsert", pa.table({"v": [1]}), failing)
    assert list(a.iterdir()) == [] and waiting.exists()  # a's rows stay in a's spool; b's request stays
    group_commit.together(lock, a, "t", "upsert", pa.table({"v": [1]}),
                          lambda rows: stored.extend(rows.column("v").to_pylist()))
    assert sorted(stored) == [1, 2] and not waiting.exists()


def test_a_dead_writers_requests_are_withdrawn_under_the_lock(tmp_path):
    """Each request goes under the lock its leader takes: claim rows placed under the
    placing lock, released claims under the deleting one."""
    (dead,) = _writers(tmp_path / "spool", 1)
    placed = dead / f"00000000000000000001-1-abcdef._claims.place{group_commit.REQUEST_SUFFIX}"
    released = dead / f"00000000000000000002-1-abcdef._claims.release{group_commit.REQUEST_SUFFIX}"
    for request in (placed, released):
        request.write_bytes(b"")
    locks = []
    assert group_commit.withdraw(dead, lambda table, kind: locks.append((table, kind)) or tmp_path / f"{table}.lock") == 2
    assert locks == [("_claims", "place"), ("_claims", "release")] and not placed.exists() and not released.exists()


def test_claims_are_placed_while_released_ones_are_being_deleted(s3_lake, tmp_path):
    """Placing new episodes' claims (an append, which Lance rebases on a delete) does not
    queue behind a delete of released claims on this machine: with the deletes' lock held,
    a writer's claims still land. Before, both took one lock, and a writer's rows waited for
    their claims behind every delete of its machine's fleet."""
    lake = Lake(s3_lake)
    (folder,) = _writers(tmp_path / "spool", 1)
    book = claims.ClaimBook(lake.location, folder)
    book.take("ep-placed", folder.name)
    placed = threading.Event()

    def place() -> None:
        book.place()
        placed.set()

    with tables.file_lock(claims.shared_lock(lake.location, layout.CLAIMS_TABLE, "release")):
        threading.Thread(target=place, daemon=True).start()
        assert placed.wait(120), "placing a claim waited for the lock of the claims' deletes"
    rows = tables.dataset(lake.location / f"{layout.CLAIMS_TABLE}.lance").to_table(columns=["episode_id"])
    assert rows.column("episode_id").to_pylist() == ["ep-placed"]


HOLD_LOCKS = textwrap.dedent("""
    import fcntl, sys
    held = [open(p, "a+") for p in {paths!r}]
    for fh in held:
        fcntl.flock(fh, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()  # until the test closes it
""")


def test_a_writer_offers_its_claims_and_episode_rows_while_another_process_holds_their_locks(s3_lake, s3_env):
    """A recorder's writer thread waits on no commit lock: with another process holding this
    machine's locks for placing claims and merging episodes, a minted episode's claim and
    row still go out in one offer to the committer (the recorder's first episode starts at
    its own pace: they go at once, alone), and its steps in the next (the committer places
    and commits them in its round, once the locks are free). Before, the writer's thread
    queued on both locks, one after the other, before it could offer its steps."""
    lake = Lake(s3_lake)
    locks = [claims.shared_lock(lake.location, layout.CLAIMS_TABLE, "place"),
             claims.shared_lock(lake.location, "episodes", "upsert")]
    for path in locks:
        path.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCKS.format(paths=[str(p) for p in locks])],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=child_env(s3_env))
    try:
        assert holder.stdout.readline().strip() == "held"
        with Recorder(s3_lake, image_checks="structure", anchor=None,
                      options=WriterOptions(batch_rows=3, max_age_s=0.2)) as rec:
            ep = rec.start_episode("t")  # a minted id: its claim waits for the writer's thread
            for s in range(3):
                ep.log_step(screenshot(s), response())
            try:
                wait_for(lambda: [bool(f.claims and f.upserts) for f in rec.writer._flights] == [True, False]
                         and rec.writer._flights[1].table == "steps", 120, every_s=0.05,
                         what="an offer with the claim and the episode row, then one with the steps")
                assert lake.sql("select count(*) n from steps").to_pylist() == [{"n": 0}]  # the committer waits
            finally:
                holder.stdin.close()  # else closing the recorder would wait for the locks forever
            assert holder.wait(timeout=60) == 0
            ep.finish(success=True)
            rec.flush()
            assert [c["episode_id"] for c in _claim_rows(lake)] == [ep.episode_id]
        stored = Lake(s3_lake)
        assert stored.sql(f"select count(*) n from steps where episode_id = '{ep.episode_id}'").to_pylist() == [{"n": 3}]
        assert stored.sql(f"select status from episodes where episode_id = '{ep.episode_id}'").column(0).to_pylist() != []
        assert _claim_rows(stored) == []  # released at the close
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def _claim_rows(lake: Lake) -> list[dict]:
    return tables.dataset(lake.location / f"{layout.CLAIMS_TABLE}.lance").to_table().to_pylist()


FLEET_WRITER = textwrap.dedent("""
    from tests.factories import response, screenshot
    from episodelake.collectors.record.recorder import Recorder
    from episodelake.lake import WriterOptions
    with Recorder({lake!r}, image_checks="structure", anchor=None,
                  options=WriterOptions(batch_rows=6, max_age_s=0.2)) as rec:
        for e in range({episodes}):
            with rec.start_episode("t", episode_id=f"w{index}-{{e}}" if e % 2 else None) as ep:
                for s in range(3):
                    ep.log_step(screenshot(s), response())
    print("closed", flush=True)
""")


def test_a_fleet_of_writer_processes_stores_every_row_once_and_leaves_no_spool(s3_lake, s3_env):
    Lake(s3_lake)
    procs = [subprocess.Popen([sys.executable, "-c", FLEET_WRITER.format(lake=s3_lake, episodes=8, index=k)],
                              env=child_env(s3_env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(4)]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0 and out.strip() == "closed", err
    lake = Lake(s3_lake)
    rows = lake.sql("select count(*) n, count(distinct (episode_id, step)) d from steps").to_pylist()[0]
    assert rows == {"n": 4 * 8 * 3, "d": 4 * 8 * 3}
    episodes = lake.sql("select status, count(*) n from episodes group by 1").to_pylist()
    assert episodes == [{"status": "finished", "n": 32}]
    claims = tables.dataset(layout.table_path(lake.location, layout.CLAIMS_TABLE)).count_rows()
    assert claims == 0  # placed before the rows, released once they were committed
    root = layout.spool_root(lake.location)
    assert [p.name for p in root.iterdir() if not p.name.startswith(".")] == []  # every writer's spool let go
