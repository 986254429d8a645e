"""Group commit: concurrent upserts into one table share Lance commits, every caller's rows
are stored when its call returns, a later write of a key wins over an earlier one, and a
failed commit is raised in every caller whose rows it held."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from episodelake.lake import Lake
from episodelake.lake.storage.group_commit import GroupCommit
from tests.waiting import wait_for


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
    assert commits < 80 and lake.group_commit.writes == 80 and lake.group_commit.rounds == commits


def test_a_later_write_of_a_key_wins_within_a_round():
    group = GroupCommit()
    committed: list[pa.Table] = []
    entered, release = threading.Event(), threading.Event()

    def slow_commit(writes) -> None:
        entered.set()
        release.wait(5)
        committed.append(pa.concat_tables(writes))

    first = threading.Thread(target=group.submit, args=("t", pa.table({"k": ["x"], "v": [0]}), slow_commit))
    first.start()
    entered.wait(5)  # the first round is committing: the next two queue behind it, in order
    queued = [threading.Thread(target=group.submit, args=("t", pa.table({"k": ["y"], "v": [v]}), lambda w: committed.append(pa.concat_tables(w))))
              for v in (1, 2)]
    queued[0].start()
    wait_for(lambda: group._queues.get("t"), 5, every_s=0.001, what="the first write to queue")
    queued[1].start()
    wait_for(lambda: len(group._queues.get("t", [])) >= 2, 5, every_s=0.001, what="the second write to queue")
    release.set()
    for t in (first, *queued):
        t.join(5)
    assert [t.to_pydict() for t in committed] == [{"k": ["x"], "v": [0]}, {"k": ["y", "y"], "v": [1, 2]}]
    assert group.rounds == 2 and group.writes == 3


def test_a_failed_commit_is_raised_in_every_caller_of_its_round():
    group = GroupCommit()
    entered, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first_commit(writes) -> None:
        entered.set()
        release.wait(5)

    def failing(writes) -> None:
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
    wait_for(lambda: len(group._queues.get("t", [])) >= 3, 5, every_s=0.001, what="three writes to queue")
    release.set()
    for t in (leader, *followers):
        t.join(5)
    # the three queued together ran in one round (the first's commit function): all three failed
    assert len(errors) == 3 and all("went away" in str(e) for e in errors)
    group.submit("t", pa.table({"k": ["ok"]}), lambda rows: None)  # the queue is free again
    with pytest.raises(OSError):
        group.submit("t", pa.table({"k": ["no"]}), failing)


def test_audited_writes_of_one_key_chain_their_rows_before_across_and_within_rounds(lake: Lake):
    """Sixteen callers write one key at once: each audit row's `before` is the row the write
    replaced, so the entries form one chain from nothing to the row stored, whatever rounds
    the writes shared; each round adds one version to the table and one to `audit`."""
    from episodelake.lake.ops import audit

    barrier = threading.Barrier(16)
    table_before, audit_before = lake.dataset("annotations").version, lake.dataset("audit").version

    def write(k: int) -> None:
        row = {"annotation_id": "a-1", "episode_id": "e", "note": f"n{k}"}
        barrier.wait()
        lake.upsert("annotations", [row], audited=lambda before: [audit.entry(
            "ana", "annotation.put", "annotations", "a-1", before[0], row)])

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(write, range(16)))
    lake.invalidate()
    log = audit.listing(lake, target_id="a-1")
    pairs = {(e["before"] or {}).get("note"): e["after"]["note"] for e in log}
    assert len(log) == 16 and len(pairs) == 16 and None in pairs  # no two entries replaced one row
    note, chain = None, []
    while note in pairs:
        note = pairs[note]
        chain.append(note)
    assert len(chain) == 16 and note == lake.dataset("annotations").to_table().to_pylist()[0]["note"]
    rounds = lake.dataset("annotations").version - table_before
    assert rounds == lake.dataset("audit").version - audit_before == lake.group_commit.rounds < 16


def test_a_write_whose_referred_row_is_missing_fails_alone_in_its_round(lake: Lake):
    """Writes that refer to an episode, half of them to none, at once: the missing ones get
    NotFound with their message and store nothing; the others are stored with the episode's
    fields handed back, whatever rounds they shared."""
    from episodelake.lake.storage.errors import NotFound
    from episodelake.lake.storage.lake import Refers

    lake.upsert("episodes", [{"episode_id": "ep-real", "task_name": "wifi", "episode_length": 3}])
    barrier = threading.Barrier(12)

    def write(k: int):
        episode = "ep-real" if k % 2 else f"ep-missing-{k}"
        barrier.wait()
        try:
            return lake.upsert("annotations", [{"annotation_id": f"a-{k}", "episode_id": episode}],
                               refers=Refers("episodes", episode, ("task_name", "episode_length"),
                                             f"episode {episode!r} is not in the lake"))
        except NotFound as exc:
            return exc

    with ThreadPoolExecutor(12) as pool:
        got = list(pool.map(write, range(12)))
    assert all(got[k] == {"task_name": "wifi", "episode_length": 3} for k in range(1, 12, 2))
    assert all(isinstance(got[k], NotFound) and f"ep-missing-{k}" in str(got[k]) for k in range(0, 12, 2))
    lake.invalidate()
    stored = sorted(lake.dataset("annotations").to_table().column("annotation_id").to_pylist())
    assert stored == sorted(f"a-{k}" for k in range(1, 12, 2))
