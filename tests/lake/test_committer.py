"""Writers upload, one committer commits (`episodelake.lake.core.committer`), on a lake in a
local folder with real Lance: many writer processes share commits, and a SIGKILL of a writer
or of the committer at any stage of a hand-off loses and doubles nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from episodelake.lake import Lake, LakeWriter, WriterOptions
from episodelake.lake.core import committer
from tests.factories import child_env, screenshot

#: A writer process: appends steps of one episode, printing each acknowledged step; with
#: `stage`, it SIGKILLs itself the `nth` time the hand-off reaches that stage.
WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from tests.factories import screenshot
    from episodelake.lake import LakeWriter, WriterOptions
    from episodelake.lake.core import committer
    stage, nth, episode, count = {stage!r}, {nth}, {episode!r}, {count}
    seen = []
    def hook(name):
        if name == stage:
            seen.append(name)
            if len(seen) >= nth:
                os.kill(os.getpid(), signal.SIGKILL)
    committer.stage_hook = hook
    w = LakeWriter({lake!r}, WriterOptions(batch_rows=10, max_age_s=0.3))
    for n in range(count):
        w.append("steps", {{"episode_id": episode, "step": n, "image": screenshot(n % 5),
                            "action_type": "click"}})
        print(n, flush=True)  # acknowledged
    w.close()
    print("closed", flush=True)
    """
)

#: A process that only commits: it opens a writer (so it becomes the machine's committer)
#: and waits; with `stage`, it SIGKILLs itself the first time a round reaches that stage.
COMMITTER = textwrap.dedent(
    """
    import os, signal, sys, time
    from episodelake.lake import LakeWriter
    from episodelake.lake.core import committer
    stage = {stage!r}
    def hook(name):
        if name == stage:
            os.kill(os.getpid(), signal.SIGKILL)
    committer.stage_hook = hook
    w = LakeWriter({lake!r})
    while w.node_committer is None:
        time.sleep(0.02)
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes it
    w.close()
    """
)


def _spawn(code: str, **stdin) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=child_env(), **stdin)


def _start_committer(lake_path: str, stage: str | None = None) -> subprocess.Popen:
    proc = _spawn(COMMITTER.format(lake=lake_path, stage=stage), stdin=subprocess.PIPE)
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


def _acknowledged(proc: subprocess.Popen) -> int:
    """The last step the writer acknowledged, once it is gone."""
    last = -1
    for line in proc.stdout.read().split():
        if line.isdigit():
            last = int(line)
    proc.wait(timeout=60)
    return last


def _stored(lake: Lake, episode: str) -> dict:
    return lake.sql(
        "select count(*) n, count(distinct step) d, coalesce(min(step), 0) lo, coalesce(max(step), -1) hi "
        f"from steps where episode_id = '{episode}'").to_pylist()[0]


def test_writer_processes_share_the_committers_commits(lake):
    """Three writer processes, 36 batches between them: the machine's committer appends
    their fragments in fewer commits than batches, and every step is stored once."""
    path = str(lake.path)
    procs = [_spawn(WRITER.format(lake=path, stage=None, nth=0, episode=f"w{k}", count=120)) for k in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.endswith("closed\n"), err
    lake = Lake(path)
    for k in range(3):
        assert _stored(lake, f"w{k}") == {"n": 120, "d": 120, "lo": 0, "hi": 119}
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
    other = _start_committer(path) if with_committer else None
    try:
        proc = _spawn(WRITER.format(lake=path, stage=stage, nth=3, episode="killed", count=100_000))
        acknowledged = _acknowledged(proc)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
        assert acknowledged >= 20
        time.sleep(0.5)  # a live committer may still commit what the dead writer offered
        reopened = Lake(path)
        assert reopened.recover()["problems"] == {}
        got = _stored(reopened, "killed")
        assert got["n"] == got["d"], got  # nothing doubled
        assert got["lo"] == 0 and got["hi"] >= acknowledged and got["n"] == got["hi"] + 1, got  # nothing lost
    finally:
        if other is not None:
            other.stdin.close()
            other.wait(timeout=60)


@pytest.mark.parametrize("stage", ["taken", "committed"])
def test_a_committer_killed_mid_round_is_replaced_and_nothing_is_lost_or_doubled(lake, stage):
    """The committer process dies after taking a writer's offers (before or after its
    commit landed): the writer becomes the committer, gets those offers back as 'retry' and
    merges them by key; it finishes normally with every step once."""
    path = str(lake.path)
    doomed = _start_committer(path, stage)
    writer = _spawn(WRITER.format(lake=path, stage=None, nth=0, episode="survivor", count=200))
    out, err = writer.communicate(timeout=300)
    assert writer.returncode == 0 and out.endswith("closed\n"), err
    assert doomed.wait(timeout=60) == -signal.SIGKILL
    got = _stored(Lake(path), "survivor")
    assert got == {"n": 200, "d": 200, "lo": 0, "hi": 199}


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
    assert _stored(Lake(lake.path), "backlog") == {"n": 95, "d": 95, "lo": 0, "hi": 94}


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
