"""Many processes on one S3 lake (moto's real S3 API on loopback): concurrent writers lose
and duplicate nothing, a writer killed mid-episode is replayed from its local spool, and an
episode id is taken by exactly one of several processes racing for it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Conflict, Lake
from episodelake.lake.storage import layout
from tests.factories import child_env, race, response, screenshot

WRITER = textwrap.dedent("""
    from tests.factories import response, screenshot
    from episodelake.collectors.record.recorder import Recorder
    from episodelake.lake import WriterOptions
    with Recorder({lake!r}, image_checks="structure", options=WriterOptions(batch_rows=20, max_age_s=0.5)) as rec:
        for e in range(5):
            with rec.start_episode("t", episode_id="w{worker}-" + str(e)) as ep:
                for s in range(12):
                    ep.log_step(screenshot(s), response(), reward=1.0)
""")


def test_four_processes_write_one_s3_lake_exactly_once(s3_lake, s3_env):
    Lake(s3_lake)  # the tables exist before the writers start
    procs = [subprocess.Popen([sys.executable, "-c", WRITER.format(lake=s3_lake, worker=k)],
                              env=child_env(s3_env), stderr=subprocess.PIPE, text=True) for k in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    lake = Lake(s3_lake)
    got = lake.sql("select count(*) n, count(distinct (episode_id, step)) d from steps").to_pylist()[0]
    assert got == {"n": 4 * 5 * 12, "d": 4 * 5 * 12}
    assert lake.sql("select count(*) from episodes where status = 'finished'")[0][0].as_py() == 20


KILLED = textwrap.dedent("""
    from tests.factories import response, screenshot
    from episodelake.collectors.record.recorder import Recorder
    from episodelake.lake import WriterOptions
    rec = Recorder({lake!r}, image_checks="structure", options=WriterOptions(batch_rows=7, max_age_s=3600))
    ep = rec.start_episode("t", episode_id="killed")
    for s in range(10_000):
        ep.log_step(screenshot(s % 5), response())
        print(s, flush=True)
""")


def test_sigkill_mid_episode_then_recover_from_the_local_spool(s3_lake, s3_env, tmp_path, monkeypatch):
    Lake(s3_lake)
    proc = subprocess.Popen([sys.executable, "-c", KILLED.format(lake=s3_lake)], env=child_env(s3_env),
                            stdout=subprocess.PIPE, text=True)
    acknowledged = -1
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 30:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for line in proc.stdout.read().split():
        acknowledged = int(line)
    spools = [p for p in layout.spool_root(s3_lake).iterdir() if not p.name.startswith(".")]
    assert len(spools) == 1  # on local disk, keyed by the lake's URI
    # the node's spool folder, carried elsewhere, is replayed by `elake recover --spool DIR`
    carried = tmp_path / "from-node-a"
    shutil.move(layout.local_spool_base(), carried)
    out = subprocess.run([sys.executable, "-m", "episodelake.api.cli", "recover", "--spool", str(carried)],
                         env=child_env(s3_env), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "replayed" in out.stdout and " 0 row" not in out.stdout, out.stderr
    lake = Lake(s3_lake)
    rows = lake.sql("select count(*) n, count(distinct step) d, max(step) hi from steps "
                    "where episode_id = 'killed'").to_pylist()[0]
    assert rows["n"] == rows["d"] == rows["hi"] + 1 and rows["hi"] >= acknowledged
    # the dead writer's claim went with its spool: the episode can be resumed, here by another
    # machine (this one's spool folder, with the note of its machine id, was carried away:
    # under the same id it would be refused as a second machine whenever the dead writer had
    # registered the id before it was killed, which depends on how soon its thread ran)
    monkeypatch.setenv(layout.MACHINE_ENV, "node-b")
    with Recorder(s3_lake, image_checks="structure") as rec:
        ep = rec.start_episode("t", episode_id="killed", resume=True)
        assert ep.log_step(screenshot(0), response()).step == rows["hi"] + 1
        ep.finish(success=True)


def _race(uri: str, env: dict, episode_ids: list[str], barrier, results) -> None:
    os.environ.update(env)
    rec = Recorder(uri, anchor=None, image_checks="structure")
    try:
        for episode_id in episode_ids:
            barrier.wait()
            try:
                ep = rec.start_episode("t", "g", episode_id=episode_id)
            except Conflict as exc:
                results.put((episode_id, f"conflict: {exc}"))
                continue
            try:
                ep.log_step(screenshot(1), response())
                ep.log_step(screenshot(2), response())
                ep.finish(success=True, eval_score=1.0)
                rec.flush()  # the claim (taken provisionally: the start asks the store nothing) is settled
            except Conflict as exc:
                results.put((episode_id, f"conflict: {exc}"))
                continue
            results.put((episode_id, f"conflict: {ep.claim.lost}" if ep.claim is not None and ep.claim.lost else "won"))
    finally:
        rec.close()


def test_processes_racing_for_one_episode_id_on_s3_end_with_one_winner(s3_lake, s3_env):
    Lake(s3_lake)
    ids = [f"race-{n}" for n in range(3)]
    outcomes = race(_race, s3_lake, s3_env, ids=ids)
    lake = Lake(s3_lake)
    for episode_id in ids:
        mine = [outcome for eid, outcome in outcomes if eid == episode_id]
        # a loser is told the id is taken: by a live recorder, or (after the winner finished)
        # because the lake holds it
        assert mine.count("won") == 1, mine
        steps = lake.sql(f"select step from steps where episode_id = '{episode_id}' order by step")
        assert steps.column(0).to_pylist() == [0, 1]
