"""Writers upload, one committer commits (`episodelake.lake.storage.committer`), on a lake in a
local folder with real Lance: many writer processes share commits, and a SIGKILL of a writer
or of the committer at any stage of a hand-off loses and doubles nothing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time

import pyarrow as pa
import pytest

from episodelake.lake import Lake, LakeWriter, WriterOptions
from episodelake.lake.storage import committer, layout
from tests.factories import screenshot
from tests.handoff import WRITER, acknowledged_by, spawn, start_committer, stored
from tests.waiting import wait_for


def test_writer_processes_share_the_committers_commits(lake):
    """Three writer processes, 36 batches between them: the machine's committer appends
    their fragments in fewer commits than batches, and every step is stored once."""
    path = str(lake.path)
    procs = [spawn(WRITER.format(lake=path, stage=None, nth=0, episode=f"w{k}", count=120)) for k in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.endswith("closed\n"), err
    lake = Lake(path)
    for k in range(3):
        assert stored(lake, f"w{k}") == {"n": 120, "d": 120, "lo": 0, "hi": 119}
    commits = len(lake.dataset("steps").versions()) - 1
    assert commits < 36


@pytest.mark.parametrize(("stage", "with_committer"), [
    ("uploaded", False), ("offered", False), ("taken", False), ("committed", False),
    # "taken" and "committed" run in the committer's process: see the committer's own test
    ("uploaded", True), ("offered", True),
], ids=lambda v: v if isinstance(v, str) else ("committer-elsewhere" if v else "lone-writer"))
def test_sigkill_of_a_writer_at_each_hand_off_stage_loses_and_doubles_nothing(lake, stage, with_committer):
    """The writer dies the third time a hand-off reaches `stage` (so earlier hand-offs are
    done): alone (it is the committer too), or with another process committing. After
    `recover`, every acknowledged step is stored exactly once."""
    path = str(lake.path)
    other = start_committer(path) if with_committer else None
    try:
        proc = spawn(WRITER.format(lake=path, stage=stage, nth=3, episode="killed", count=100_000))
        acknowledged = acknowledged_by(proc)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
        assert acknowledged >= 20
        time.sleep(0.5)  # a live committer may still commit what the dead writer offered
        reopened = Lake(path)
        assert reopened.recover()["problems"] == {}
        got = stored(reopened, "killed")
        assert got["n"] == got["d"], got  # nothing doubled
        assert got["lo"] == 0 and got["hi"] >= acknowledged and got["n"] == got["hi"] + 1, got  # nothing lost
    finally:
        if other is not None:
            other.stdin.close()
            other.wait(timeout=60)


@pytest.mark.parametrize("stage", ["taken", "merged", "committed", "updating", "updated"])
def test_a_committer_killed_mid_round_is_replaced_and_nothing_is_lost_or_doubled(lake, stage):
    """The committer process dies after taking a writer's offers (before its commits, after
    it merged their episode rows, after the steps' commit landed, or while or after it
    merged an episode's later rows, which it does after the round): the writer becomes the
    committer, gets those offers back as 'retry' and merges them by key; it finishes normally
    with every step once, and its episode row as it last wrote it."""
    path = str(lake.path)
    doomed = start_committer(path, stage)
    writer = spawn(WRITER.format(lake=path, stage=None, nth=0, episode="survivor", count=200))
    out, err = writer.communicate(timeout=300)
    assert writer.returncode == 0 and out.endswith("closed\n"), err
    assert doomed.wait(timeout=60) == -signal.SIGKILL
    reopened = Lake(path)
    assert stored(reopened, "survivor") == {"n": 200, "d": 200, "lo": 0, "hi": 199}
    episode = reopened.sql("select task_name from episodes where episode_id = 'survivor'").to_pylist()
    assert episode == [{"task_name": "at-175"}]  # the last row written, not an older one offered before it


def test_a_backlog_commits_in_batches_and_frees_the_spool_as_it_goes(lake):
    """Rows that piled up (here: a writer whose thread was held back) go to the lake a batch
    or two per commit, and the spool segments, about one batch each, go as they are committed."""
    w = LakeWriter(lake.path, WriterOptions(batch_rows=10, max_age_s=60, handoff=False))
    with w._commit_lock:  # the writer's thread cannot commit meanwhile
        for n in range(95):
            w.append("steps", {"episode_id": "backlog", "step": n, "image": screenshot(n % 5)})
        segments = list(w._spool.dir.glob("steps-*.arrows"))
        assert len(segments) == 10  # one per batch, not one for the whole backlog
    w.flush()
    assert not list(w._spool.dir.glob("*.arrows"))
    versions = len(lake.dataset("steps").versions()) - 1
    assert 5 <= versions <= 10  # a batch or two per commit
    w.close()
    assert stored(Lake(lake.path), "backlog") == {"n": 95, "d": 95, "lo": 0, "hi": 94}


def test_hand_off_files_name_their_stage(tmp_path):
    """The hand-off's stage is read from its file name, whichever move happened last."""
    offer = tmp_path / f"00000001-steps{committer.OFFER}"
    assert committer.state(offer) is None
    offer.write_text("{}")
    assert committer.state(offer) == committer.OFFER
    offer.rename(tmp_path / f"00000001-steps{committer.TAKEN}")
    assert committer.state(offer) == committer.TAKEN
    (tmp_path / f"00000001-steps{committer.DONE}").write_text('{"version": 3}')
    assert committer.state(offer) == committer.TAKEN  # done is written before taken goes
    (tmp_path / f"00000001-steps{committer.TAKEN}").unlink()
    assert committer.state(offer) == committer.DONE and committer.committed_version(offer) == 3
    committer.forget(offer)
    assert committer.state(offer) is None


def test_episode_rows_are_offered_with_their_steps_and_committed_before_them(lake):
    """A batch with a new episode row: the writer commits nothing itself, it offers the
    episode row with the steps' fragments; the committer merges the episode first and
    appends the steps after, so no step is ever visible before its episode."""
    seen = []

    def look(stage):
        now = Lake(lake.path)
        episodes = now.sql("select count(*) from episodes where episode_id = 'e1'").column(0)[0].as_py()
        steps = now.sql("select count(*) from steps where episode_id = 'e1'").column(0)[0].as_py()
        seen.append((stage, episodes, steps))

    committer.stage_hook = lambda stage: look(stage) if stage in ("merged", "committed") else None
    try:
        with LakeWriter(lake.path, WriterOptions(batch_rows=10, max_age_s=60)) as w:
            deadline = time.monotonic() + 30
            while w.node_committer is None and time.monotonic() < deadline:  # elected
                time.sleep(0.02)
            with committer.commit_lock(w.lake):  # no round until the offer is looked at
                w.append("episodes", {"episode_id": "e1", "task_name": "t", "status": "running"})
                for n in range(10):  # the tenth fills the batch
                    w.append("steps", {"episode_id": "e1", "step": n, "image": screenshot(n % 5)})
                deadline = time.monotonic() + 30
                while not w._flights and time.monotonic() < deadline:
                    time.sleep(0.02)
                look("offered")
            w.flush()
            assert w.commits == 2  # the committer's merge and append carried this writer's rows
    finally:
        committer.stage_hook = None
    assert seen == [("offered", 0, 0), ("merged", 1, 0), ("committed", 1, 10)]
    assert stored(Lake(lake.path), "e1") == {"n": 10, "d": 10, "lo": 0, "hi": 9}


def _two_offers_out(w: LakeWriter) -> None:
    """With the caller holding the commit lock (no round runs): the writer offers episode
    e2's first row ("first") with steps 0-4, then its newer row ("second") with steps 5-9,
    the second while the first is still in flight."""
    w.append("episodes", {"episode_id": "e2", "task_name": "first", "status": "running"})
    for n in range(5):
        w.append("steps", {"episode_id": "e2", "step": n, "image": screenshot(n % 5)})
    deadline = time.monotonic() + 30
    while not w._flights and time.monotonic() < deadline:
        time.sleep(0.02)
    w.append("episodes", {"episode_id": "e2", "task_name": "second", "status": "done"})
    for n in range(5, 10):
        w.append("steps", {"episode_id": "e2", "step": n, "image": screenshot(n % 5)})
    while len(w._flights) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(w._flights) == 2 and all(f.carries for f in w._flights)


def _elected(w: LakeWriter) -> None:
    deadline = time.monotonic() + 30
    while w.node_committer is None and time.monotonic() < deadline:  # elected (it takes the lock once)
        time.sleep(0.02)


def test_a_writer_offers_again_while_an_offer_with_episode_rows_is_in_flight(lake):
    """A writer does not wait for its offer of episode rows to be committed before it
    offers the next batch: one round takes both, in the order they were offered, so the
    newer episode row wins and every step lands once."""
    with LakeWriter(lake.path, WriterOptions(batch_rows=5, max_age_s=60)) as w:
        _elected(w)
        with committer.commit_lock(w.lake):  # no committer round meanwhile
            _two_offers_out(w)
        w.flush()
    reopened = Lake(lake.path)
    assert stored(reopened, "e2") == {"n": 10, "d": 10, "lo": 0, "hi": 9}
    assert reopened.sql("select task_name from episodes where episode_id = 'e2'").to_pylist() == [{"task_name": "second"}]


def test_an_offer_sent_back_sends_back_the_writers_later_offers_and_they_are_merged_in_order(lake):
    """The first of two offers comes back from a failed round: the committer commits
    nothing more of that writer (the later offer goes back too, unmerged), and the writer
    merges both by key in the order it offered them: the older episode row never lands over
    the newer one, no step lands before its episode or twice."""
    stages: list[str] = []
    with LakeWriter(lake.path, WriterOptions(batch_rows=5, max_age_s=60)) as w:
        _elected(w)
        with committer.commit_lock(w.lake):
            _two_offers_out(w)
            first = w._flights[0].offer
            assert committer._move(first, committer.RETRY) is not None  # as a round whose merge failed
            committer.stage_hook = stages.append
        try:
            w.flush()
        finally:
            committer.stage_hook = None
        assert w._returned == [] and not list(w._spool.dir.glob(f"*{committer.RETRY}"))
    assert not {"taken", "merged", "committed", "updating"} & set(stages)  # the later offer was not committed by a round
    reopened = Lake(lake.path)
    assert stored(reopened, "e2") == {"n": 10, "d": 10, "lo": 0, "hi": 9}
    assert reopened.sql("select task_name from episodes where episode_id = 'e2'").to_pylist() == [{"task_name": "second"}]


def test_an_episodes_later_row_is_merged_after_its_rounds_steps_and_its_offer_is_done_only_then(lake):
    """The second of two offers carries a newer row of an episode the first offered: the
    round merges the first row before the steps and appends both offers' steps; the newer
    row is merged after the round (the steps do not wait for it), and the offer holding it
    is done only once it is, so its writer keeps its rows until then."""
    seen = []

    def look(stage):
        now = Lake(lake.path)
        steps = now.sql("select count(*) from steps where episode_id = 'e2'").column(0)[0].as_py()
        task = now.sql("select task_name from episodes where episode_id = 'e2'").to_pylist()
        seen.append((stage, steps, task, [committer.state(f.offer) == committer.TAKEN for f in flights]))

    with LakeWriter(lake.path, WriterOptions(batch_rows=5, max_age_s=60)) as w:
        _elected(w)
        with committer.commit_lock(w.lake):
            _two_offers_out(w)
            flights = list(w._flights)
            committer.stage_hook = lambda stage: look(stage) if stage in ("committed", "updating", "updated") else None
        try:
            w.flush()
        finally:
            committer.stage_hook = None
    assert seen == [  # (stage, steps seen, episode row seen, which offers are still out)
        ("committed", 10, [{"task_name": "first"}], [True, True]),
        ("updating", 10, [{"task_name": "first"}], [False, True]),
        ("updated", 10, [{"task_name": "second"}], [False, True]),
    ]
    assert stored(Lake(lake.path), "e2") == {"n": 10, "d": 10, "lo": 0, "hi": 9}


def test_a_failed_merge_of_later_rows_sends_back_the_writers_later_offers_too(lake):
    """The merge of an episode's newer row ("second") fails after its round, while a later
    round has already taken the writer's next offer (steps and an even newer row, "third"):
    that offer's row is not merged behind the failed one (its writer's folder holds an offer
    that came back) but sent back too, and the writer merges both in the order it offered
    them: "third" wins, and every step is stored once."""
    entered, go = threading.Event(), threading.Event()

    def fail_once(stage):
        if stage == "updating" and not entered.is_set():
            entered.set()
            go.wait(60)
            raise OSError("the store refused the merge")

    with LakeWriter(lake.path, WriterOptions(batch_rows=5, max_age_s=60)) as w:
        _elected(w)
        committer.stage_hook = fail_once
        try:
            with committer.commit_lock(w.lake):
                _two_offers_out(w)
            assert entered.wait(60)  # the lane merges "second" and is held there
            w.append("episodes", {"episode_id": "e2", "task_name": "third", "status": "done"})
            for n in range(10, 15):
                w.append("steps", {"episode_id": "e2", "step": n, "image": screenshot(n % 5)})
            wait_for(lambda: stored(Lake(lake.path), "e2")["n"] == 15, 60, what="the third offer's round")
            go.set()
            w.flush()
        finally:
            go.set()
            committer.stage_hook = None
    reopened = Lake(lake.path)
    assert stored(reopened, "e2") == {"n": 15, "d": 15, "lo": 0, "hi": 14}
    assert reopened.sql("select task_name from episodes where episode_id = 'e2'").to_pylist() == [{"task_name": "third"}]


def test_a_dead_writers_replay_waits_while_updates_are_being_merged(lake):
    """A replay settles a dead writer's hand-offs only while no round and no merge of updates
    runs (`committer.quiet`), so no update of that writer lands over the replay of its rows:
    with the update lock held (the lane mid-merge), the replay leaves the spool as it is and
    says why; once the lock is free it replays, and every acknowledged step is stored once."""
    from episodelake.lake.storage import writer  # noqa: PLC0415
    from episodelake.lake.storage.store import location  # noqa: PLC0415

    path = str(lake.path)
    proc = spawn(WRITER.format(lake=path, stage="offered", nth=3, episode="dead", count=100_000))
    acknowledged = acknowledged_by(proc)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
    loc = location(path)
    offers = sorted(layout.spool_root(loc).glob(f"*/*{committer.OFFER}"))
    assert offers  # the dead writer's hand-offs, not yet taken by any round
    with committer._flock(loc, committer.UPDATE_LOCK, None):
        report = writer.replay_orphans(loc, settle_wait_s=0.3)
        assert report.rows == 0 and len(report.deferred) == 1 and "mid-commit" in report.deferred[0], report
        assert sorted(layout.spool_root(loc).glob(f"*/*{committer.OFFER}")) == offers  # left as they were
    report = writer.replay_orphans(loc)
    assert report.deferred == [] and report.rows > 0
    got = stored(Lake(path), "dead")
    assert got["n"] == got["d"] and got["lo"] == 0 and got["hi"] >= acknowledged and got["n"] == got["hi"] + 1, got


def test_an_offer_with_episode_rows_is_sent_back_by_a_committer_of_an_older_release(tmp_path):
    """A committer of the previous release read offers with `json.loads` and appended their
    fragments only: an offer carrying episode rows or claims is not JSON to it (so it marks it
    retry, and the writer merges the rows by key) instead of being committed without them;
    this release reads both kinds."""
    rows = pa.table({"episode_id": ["e1"]})
    with_rows = committer.offer(tmp_path, "00000001-rows", None, 0, [], upserts={"episodes": rows})
    with pytest.raises(ValueError):
        json.loads(with_rows.read_text())
    assert committer._decode(committer._read_offer(with_rows)["upserts"]["episodes"]).equals(rows)
    # nor to the release before this one, which knew upserts and claims but not inserts and updates
    assert not with_rows.read_text().startswith(committer.OLD_ROWS_MARK)
    older = tmp_path / f"00000003-rows{committer.OFFER}"
    older.write_text(committer.OLD_ROWS_MARK + json.dumps({"table": None, "rows": 0, "fragments": [],
                                                           "upserts": {"episodes": committer._encode(rows)}}))
    assert committer._decode(committer._read_offer(older)["upserts"]["episodes"]).equals(rows)
    steps_only = committer.offer(tmp_path, "00000002-steps", "steps", 0, [])
    assert json.loads(steps_only.read_text())["table"] == "steps"


def test_a_writer_folder_removed_while_offers_are_listed_is_skipped(tmp_path, monkeypatch):
    """A writer that closes (and removes its folder) while the committer lists the offers
    does not fail the round: the other writers' offers are still found."""
    root = tmp_path / "spool"
    (root / "open").mkdir(parents=True)
    (root / "open" / f"seg1{committer.OFFER}").write_text("{}")
    (root / "open" / "seg2.rows").write_text("")
    (root / "closing").mkdir()
    listing = os.scandir

    def writer_closes_meanwhile(path):
        if str(path).endswith("closing"):
            shutil.rmtree(path)
        return listing(path)

    monkeypatch.setattr(os, "scandir", writer_closes_meanwhile)
    assert committer.offered(root) == [root / "open" / f"seg1{committer.OFFER}"]
    assert committer.offered(tmp_path / "no spool yet") == []


def test_the_committer_keeps_the_episodes_it_merges_compact(lake):
    """A fleet with no server beside it: the machine's committer compacts `episodes` once it
    is past `tables.MAX_FRAGMENTS` fragments, every `COMPACT_CHECK_EVERY` rounds that merged
    into it, so a merge never reads an ever longer list of fragments; every row stays."""
    from episodelake.lake.storage import tables  # noqa: PLC0415

    rounds = 3 * committer.COMPACT_CHECK_EVERY
    peak = 0
    with LakeWriter(lake.path, WriterOptions(batch_rows=4, max_age_s=60)) as w:
        for k in range(rounds):
            w.append("episodes", {"episode_id": f"e{k}", "task_name": "t", "status": "running"})
            for n in range(2):
                w.append("steps", {"episode_id": f"e{k}", "step": n, "image": screenshot(n)})
            w.flush()  # one round, one merge of its episode row
            peak = max(peak, tables.fragment_count(lake.path, "episodes"))
    assert peak <= tables.MAX_FRAGMENTS + committer.COMPACT_CHECK_EVERY + 1, peak  # not one per round
    reopened = Lake(lake.path)
    assert reopened.sql("select count(*) from episodes")[0][0].as_py() == rounds
    assert reopened.sql("select count(*) from steps")[0][0].as_py() == 2 * rounds
