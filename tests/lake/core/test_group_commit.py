"""Group commit: concurrent upserts into one table share Lance commits, every caller's rows
are stored when its call returns, a later write of a key wins over an earlier one, and a
failed commit is raised in every caller whose rows it held."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from episodelake.lake import Lake
from episodelake.lake.core.group_commit import GroupCommit


def test_concurrent_upserts_share_commits_and_all_land(lake: Lake):
    before = lake.dataset("annotations").version
    barrier = threading.Barrier(16)

    def write(k: int) -> None:
        barrier.wait()
        for n in range(5):
            lake.upsert("annotations", [{"annotation_id": f"a-{k}-{n}", "episode_id": "e", "note": f"{k}/{n}"}])
            # durable on return: this caller's own row is readable at once
            assert lake.dataset("annotations").count_rows(filter=f"annotation_id = 'a-{k}-{n}'") == 1

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(write, range(16)))
    lake.invalidate()
    assert lake.dataset("annotations").count_rows() == 80
    commits = lake.dataset("annotations").version - before
    assert commits < 80 and lake.group_commit.rows == 80 and lake.group_commit.rounds == commits


def test_a_later_write_of_a_key_wins_within_a_round():
    group = GroupCommit()
    committed: list[pa.Table] = []
    entered, release = threading.Event(), threading.Event()

    def slow_commit(rows: pa.Table) -> None:
        entered.set()
        release.wait(5)
        committed.append(rows)

    first = threading.Thread(target=group.submit, args=("t", pa.table({"k": ["x"], "v": [0]}), slow_commit))
    first.start()
    entered.wait(5)  # the first round is committing: the next two queue behind it, in order
    queued = [threading.Thread(target=group.submit, args=("t", pa.table({"k": ["y"], "v": [v]}), committed.append))
              for v in (1, 2)]
    queued[0].start()
    while not group._queues.get("t"):
        time.sleep(0.001)
    queued[1].start()
    while len(group._queues.get("t", [])) < 2:
        time.sleep(0.001)
    release.set()
    for t in (first, *queued):
        t.join(5)
    assert [t.to_pydict() for t in committed] == [{"k": ["x"], "v": [0]}, {"k": ["y", "y"], "v": [1, 2]}]
    assert group.rounds == 2 and group.rows == 3


def test_a_failed_commit_is_raised_in_every_caller_of_its_round():
    group = GroupCommit()
    entered, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first_commit(rows: pa.Table) -> None:
        entered.set()
        release.wait(5)

    def failing(rows: pa.Table) -> None:
        raise OSError("the store went away")

    def call(commit) -> None:
        try:
            group.submit("t", pa.table({"k": ["z"]}), commit)
        except OSError as exc:
            errors.append(exc)

    leader = threading.Thread(target=call, args=(first_commit,))
    leader.start()
    entered.wait(5)
    followers = [threading.Thread(target=call, args=(failing,)) for _ in range(3)]
    for t in followers:
        t.start()
    while len(group._queues.get("t", [])) < 3:
        time.sleep(0.001)
    release.set()
    for t in (leader, *followers):
        t.join(5)
    # the three queued together ran in one round (the first's commit function): all three failed
    assert len(errors) == 3 and all("went away" in str(e) for e in errors)
    group.submit("t", pa.table({"k": ["ok"]}), lambda rows: None)  # the queue is free again
    with pytest.raises(OSError):
        group.submit("t", pa.table({"k": ["no"]}), failing)
