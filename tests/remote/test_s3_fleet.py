"""A fleet writing one S3 lake (moto's real S3 API, behind the tests' TCP proxy where the
store must go away): episodes start and steps log while the store refuses or hangs, a
writer SIGKILLed at any stage of its hand-off to the committer loses and doubles nothing,
and a deleted bucket or bad credentials are one clear line. Behaviour, not timing: the
bounds are generous."""

from __future__ import annotations

import http.server
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Conflict, Lake, WriterOptions
from episodelake.lake.storage import layout, spool, tables
from episodelake.lake.storage.store import StoreUnavailable
from episodelake.lake.storage.writer import CommitFailed
from tests.factories import child_env, response, screenshot
from tests.handoff import WRITER, acknowledged_by, spawn, start_committer, stored
from tests.remote.proxy import flush_once_back
from tests.waiting import wait_for

#: Far above a local append (milliseconds), far below a hung request (tens of seconds).
SLOW_S = 2.0


def _timed(fn, *args, **kwargs):
    started = time.monotonic()
    result = fn(*args, **kwargs)
    return result, time.monotonic() - started


def _claims(uri: str) -> list[dict]:
    lake = Lake(uri)
    if layout.CLAIMS_TABLE not in {p.removesuffix(".lance") for p in lake.location.children()}:
        return []
    import lance

    ds = lance.dataset(str(layout.table_path(lake.location, layout.CLAIMS_TABLE)),
                       storage_options=lake.location.storage_options)
    return ds.to_table().to_pylist()


@pytest.mark.parametrize("outage", ["refused", "hung"])
def test_episodes_start_and_steps_log_while_the_store_is_down(s3_proxied_lake, s3_proxy, outage):
    """With the store refusing connections or hanging for 10 s, a recorder keeps starting
    episodes (ids it mints need no claim up front) and logging steps, each call far quicker
    than the store's timeouts; once it is back, every step is stored exactly once and the
    episodes' claims were written and let go."""
    rec = Recorder(s3_proxied_lake, image_checks="structure", anchor=None,
                   options=WriterOptions(batch_rows=5, max_age_s=0.3))
    warm = rec.start_episode("t")  # the tables and the committer are up before the outage
    warm.log_step(screenshot(0), response())
    warm.finish(success=True)
    rec.flush()
    slowest = 0.0
    episodes: dict[str, int] = {}
    with (s3_proxy.blocked() if outage == "refused" else s3_proxy.hanging()):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ep, took = _timed(rec.start_episode, "t", "during the outage")
            slowest = max(slowest, took)
            for n in range(4):
                _, took = _timed(ep.log_step, screenshot(n), response())
                slowest = max(slowest, took)
                time.sleep(0.05)
            _, took = _timed(ep.finish, success=True)
            slowest = max(slowest, took)
            episodes[ep.episode_id] = 4
    assert slowest < SLOW_S, f"a call waited {slowest:.2f} s on the store"
    assert len(episodes) >= 5
    flush_once_back(rec)
    rec.close()
    lake = Lake(s3_proxied_lake)
    got = lake.sql("select episode_id, count(*) n, count(distinct step) d from steps group by episode_id").to_pylist()
    by_id = {r["episode_id"]: (r["n"], r["d"]) for r in got}
    for episode_id, steps in episodes.items():
        assert by_id.get(episode_id) == (steps, steps), episode_id
    finished = lake.sql("select count(*) from episodes where status = 'finished'")[0][0].as_py()
    assert finished == len(episodes) + 1
    held = [c for c in _claims(s3_proxied_lake) if c["episode_id"] in episodes]
    assert held == []  # written before the rows, deleted once they were committed


def test_a_minted_episode_is_claimed_before_its_rows_are_seen(s3_lake):
    """A minted id's claim is deferred, not skipped: once its rows are in the lake, another
    recorder cannot resume it while the first one holds it."""
    first = Recorder(s3_lake, image_checks="structure", anchor=None)
    ep = first.start_episode("t")
    ep.log_step(screenshot(0), response())
    first.flush()
    assert [c["episode_id"] for c in _claims(s3_lake)] == [ep.episode_id]
    with Recorder(s3_lake, image_checks="structure", anchor=None) as second:
        with pytest.raises(Conflict, match="being recorded by another recorder"):
            second.start_episode("t", episode_id=ep.episode_id, resume=True)
    ep.finish(success=True)
    first.close()
    assert _claims(s3_lake) == []
    with Recorder(s3_lake, image_checks="structure", anchor=None) as third:
        with pytest.raises(Conflict, match="finished"):
            third.start_episode("t", episode_id=ep.episode_id, resume=True)


KILLED = textwrap.dedent("""
    import os, signal
    from tests.factories import response, screenshot
    from episodelake.collectors.record.recorder import Recorder
    from episodelake.lake import WriterOptions
    from episodelake.lake.storage import committer
    seen = []
    def hook(name):
        if name == {stage!r}:
            seen.append(name)
            if len(seen) >= 2:
                os.kill(os.getpid(), signal.SIGKILL)
    committer.stage_hook = hook
    rec = Recorder({lake!r}, image_checks="structure", anchor=None,
                   options=WriterOptions(batch_rows=6, max_age_s=0.3))
    ep = rec.start_episode("t", episode_id="killed")
    for s in range(10_000):
        ep.log_step(screenshot(s % 5), response())
        print(s, flush=True)
""")


@pytest.mark.parametrize("stage", ["uploaded", "offered", "taken", "committed"])
def test_sigkill_at_each_hand_off_stage_then_recover(s3_lake, s3_env, stage):
    """A recorder (its own committer) killed the second time a hand-off reaches `stage`:
    `elake recover` settles its hand-offs and replays its spool by key; every acknowledged
    step is stored once, and the episode can be resumed after it."""
    Lake(s3_lake)
    proc = subprocess.Popen([sys.executable, "-c", KILLED.format(lake=s3_lake, stage=stage)],
                            env=child_env(s3_env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err
    acknowledged = max(int(n) for n in out.split())
    done = subprocess.run([sys.executable, "-m", "episodelake.api.cli", "recover"], env=child_env(s3_env),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lake = Lake(s3_lake)
    rows = lake.sql("select count(*) n, count(distinct step) d, max(step) hi from steps "
                    "where episode_id = 'killed'").to_pylist()[0]
    assert rows["n"] == rows["d"] == rows["hi"] + 1 and rows["hi"] >= acknowledged, rows
    with Recorder(s3_lake, image_checks="structure", anchor=None) as rec:
        ep = rec.start_episode("t", episode_id="killed", resume=True)
        assert ep.log_step(screenshot(0), response()).step == rows["hi"] + 1
        ep.finish(success=True)


def test_a_deleted_bucket_is_one_clear_line_and_loses_nothing_acknowledged(s3_lake, s3_server):
    rec = Recorder(s3_lake, image_checks="structure", anchor=None,
                   options=WriterOptions(batch_rows=1000, max_age_s=3600))
    ep = rec.start_episode("t", episode_id="orphaned")
    for n in range(3):
        ep.log_step(screenshot(n), response())
    # the writer's thread takes this machine's id in the lake first, and commits the episode's
    # row at once (a recorder's first episode starts at its own pace): both write to the bucket
    wait_for(lambda: rec.writer._registered, 60, every_s=0.1, what="the machine's id taken")
    wait_for(lambda: "orphaned" in _episodes(s3_lake), 60, every_s=0.1, what="the episode's row committed")
    bucket = s3_lake.split("/")[2]
    client = s3_server.client()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            client.delete_object(Bucket=bucket, Key=obj["Key"])
    client.delete_bucket(Bucket=bucket)
    with pytest.raises(CommitFailed) as failed:
        rec.flush()
    text = str(failed.value)
    assert "\n" not in text and "bucket does not exist" in text, text
    folder = rec.writer._spool.dir
    with pytest.raises(CommitFailed, match="bucket does not exist"):
        rec.close()
    # the acknowledged steps stay in the spool, for `elake recover` once the lake is back
    steps = [spool.read_segment(p).rows for p in folder.glob("steps-*.arrows")]
    assert sorted(n for t in steps for n in t.column("step").to_pylist()) == [0, 1, 2]


class _Denying(http.server.BaseHTTPRequestHandler):
    """An S3 endpoint that refuses every request as S3 does a bad secret key (403)."""

    def _deny(self) -> None:
        body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code>'
                b"<Message>The request signature we calculated does not match</Message></Error>")
        self.send_response(403)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _deny

    def log_message(self, *args) -> None:
        pass


def test_bad_credentials_are_one_clear_line(s3_lake, monkeypatch):
    """A store that answers 403 to everything (what a wrong secret key gets from S3; moto
    does not check signatures, so a stub endpoint answers here). Opening the lake says so at
    once; a recorder, which opens without asking the store, says so at its first commit and
    its close, and keeps what it recorded in its spool."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Denying)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(StoreUnavailable) as denied:
            Lake(s3_lake)
        rec = Recorder(s3_lake, image_checks="structure", anchor=None)
        with rec.start_episode("t", "denied") as ep:
            ep.log_step(screenshot(0), response())
        with pytest.raises(CommitFailed) as closing:
            rec.close()
    finally:
        server.shutdown()
    text = str(denied.value)
    assert "\n" not in text and "access denied" in text, text
    assert "\n" not in str(closing.value) and "access denied" in str(closing.value), closing.value
    assert " 0 row(s)" not in str(closing.value) and "row(s)" in str(closing.value)  # kept in the spool


@pytest.mark.parametrize("stage", ["uploaded", "offered"])
def test_a_writer_killed_beside_another_committer_on_s3_loses_and_doubles_nothing(s3_proxied_lake, stage):
    """On S3 behind the proxy: another process is the machine's committer; the writer dies
    the third time its hand-off reaches `stage`. After `recover`, every acknowledged step is
    stored exactly once."""
    other = start_committer(s3_proxied_lake)
    try:
        proc = spawn(WRITER.format(lake=s3_proxied_lake, stage=stage, nth=3, episode="killed", count=100_000))
        acknowledged = acknowledged_by(proc)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
        time.sleep(0.5)  # the live committer may still commit what the dead writer offered
        lake = Lake(s3_proxied_lake)
        assert lake.recover()["problems"] == {}
        got = stored(lake, "killed")
        assert got["n"] == got["d"] and got["lo"] == 0 and got["hi"] >= acknowledged and got["n"] == got["hi"] + 1, got
    finally:
        other.stdin.close()
        other.wait(timeout=120)


MINTING = textwrap.dedent("""
    from tests.factories import response, screenshot
    from episodelake.collectors.record.recorder import Recorder
    from episodelake.lake import WriterOptions
    with Recorder({lake!r}, image_checks="structure", anchor=None,
                  options=WriterOptions(batch_rows=4, max_age_s=0.2)) as rec:
        for e in range(6):
            with rec.start_episode("t") as ep:
                for s in range(5):
                    ep.log_step(screenshot(s), response())
                    print(ep.episode_id, s, flush=True)
    print("closed", flush=True)
""")


@pytest.mark.parametrize("stage", ["placed", "merged", "updating", "updated"])
def test_a_committer_killed_after_placing_claims_or_merging_episodes_loses_and_doubles_nothing(s3_lake, s3_env, stage):
    """The committer process dies in its round after it appended the offered claims (or
    committed the offered first episode rows) and before the steps' append, or while and
    after it merged the finished episodes' rows (which it does after the round): the recorder's process
    becomes the committer, gets the offers back and merges them by key (its claims placed
    again first). Every step is stored once, every episode once, and no claim is left."""
    doomed = start_committer(s3_lake, stage)
    proc = subprocess.Popen([sys.executable, "-c", MINTING.format(lake=s3_lake)], env=child_env(s3_env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and out.endswith("closed\n"), err
    assert doomed.wait(timeout=60) == -signal.SIGKILL
    lake = Lake(s3_lake)
    ids = sorted({line.split()[0] for line in out.splitlines() if line != "closed"})
    assert len(ids) == 6
    got = lake.sql("select episode_id, count(*) n, count(distinct step) d from steps group by 1 order by 1").to_pylist()
    assert got == [{"episode_id": i, "n": 5, "d": 5} for i in ids]
    episodes = lake.sql("select episode_id, count(*) n from episodes group by 1 order by 1").to_pylist()
    assert episodes == [{"episode_id": i, "n": 1} for i in ids]
    claims_left = tables.dataset(lake.location / f"{layout.CLAIMS_TABLE}.lance").count_rows()
    assert claims_left == 0


@pytest.mark.parametrize("stage", ["taken", "merged", "committed"])
def test_a_committer_killed_mid_round_on_s3_during_an_outage_is_replaced(s3_proxied_lake, s3_proxy, stage):
    """On S3 behind the proxy: the committer process dies after taking a writer's offers
    (before or after its commit landed), and the store then goes away for a while; the
    writer becomes the committer and merges the taken offers by key. If the outage catches
    its close, the close fails with the rows in its spool, and `recover` replays them: every
    acknowledged step is stored once either way."""
    doomed = start_committer(s3_proxied_lake, stage)
    writer = spawn(WRITER.format(lake=s3_proxied_lake, stage=None, nth=0, episode="survivor", count=200))
    assert doomed.wait(timeout=300) == -signal.SIGKILL
    with s3_proxy.blocked():
        time.sleep(3)  # the writer's commits fail meanwhile; its steps wait in its spool
    acknowledged = acknowledged_by(writer)
    assert acknowledged == 199, writer.stderr.read()  # an append never waits on the store
    lake = Lake(s3_proxied_lake)
    assert lake.recover()["problems"] == {}
    assert stored(lake, "survivor") == {"n": 200, "d": 200, "lo": 0, "hi": 199}


def _episodes(uri: str) -> dict[str, str]:
    """episode_id -> status, as a reader sees the lake now."""
    return {r["episode_id"]: r["status"] for r in Lake(uri).sql("select episode_id, status from episodes").to_pylist()}


def test_a_paced_collectors_episode_boundary_commits_at_once_and_a_burst_waits_for_its_batch(s3_lake):
    """An episode that took at least `max_age_s` (a collector at its own pace): starting the
    next one commits the finished episode (its last step and outcome) with the new one's
    claim and row at once, whatever the rows' age, and none of the new one's steps, even one
    logged before the writer's thread took the rows (they wait for their batch). Episodes
    started in a burst stay pending until their batch is due (here: never before the flush)."""
    rec = Recorder(s3_lake, image_checks="structure", anchor=None,
                   options=WriterOptions(batch_rows=1000, max_age_s=3600))
    try:
        first = rec.start_episode("t", "goal")
        first.log_step(screenshot(0), response())
        first.finish(success=True)
        rec._last_start -= 3600  # as if the first episode had taken an hour
        second = rec.start_episode("t", "goal")
        second.log_step(screenshot(1), response())  # after the boundary: not in its commit, however quick
        wait_for(lambda: _episodes(s3_lake) == {first.episode_id: "finished", second.episode_id: "running"}, 60,
                 every_s=0.2, what="the boundary's commit")
        assert {c["episode_id"] for c in _claims(s3_lake)} >= {second.episode_id}  # claimed before it is seen
        time.sleep(0.5)  # five ticks of the writer's thread
        assert Lake(s3_lake).sql("select count(*) n from steps").to_pylist() == [{"n": 1}]
        second.finish(success=False)
        third = rec.start_episode("t", "goal")  # a burst: the second episode took no time
        time.sleep(1.0)  # ten ticks of the writer's thread
        assert third.episode_id not in _episodes(s3_lake)
        rec.flush()
        assert _episodes(s3_lake)[second.episode_id] == "finished" and third.episode_id in _episodes(s3_lake)
    finally:
        rec.close()


ORPHANS = "select count(*) n from steps s left join episodes e using (episode_id) where e.episode_id is null"


def test_no_step_is_seen_before_its_episode_whether_its_first_row_rides_with_it_or_not(s3_lake):
    """Episodes at their own pace (each boundary offers the next episode's claim and first row
    without its steps) and in bursts (first rows and their steps in one offer): the committer
    appends a round's steps beside its claims and first rows only when they need none of
    them, the rest after, and merges the finish rows after the round. With the claims'
    commit slowed down, every commit of steps, and a reader polling all along, still finds
    every step's episode; at the end every step and episode is stored once, the episodes'
    first rows came in appends and their finish rows in merges."""
    from episodelake.lake.storage import committer  # noqa: PLC0415

    rec = Recorder(s3_lake, image_checks="structure", anchor=None,
                   options=WriterOptions(batch_rows=100, max_age_s=0.3))
    at_commit: list[int] = []
    polled: list[int] = []
    stop = threading.Event()

    def hook(stage: str) -> None:
        if stage == "placed":
            time.sleep(0.3)  # the first rows land well after any steps appended beside them
        elif stage == "committed":
            at_commit.append(Lake(s3_lake).sql(ORPHANS).to_pylist()[0]["n"])

    def poll() -> None:
        reader = Lake(s3_lake)  # each query reads the tables' latest versions
        while not stop.is_set():
            polled.append(reader.sql(ORPHANS).to_pylist()[0]["n"])

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    committer.stage_hook = hook
    ids = []
    try:
        for k in range(8):
            ep = rec.start_episode("t", "goal")
            ids.append(ep.episode_id)
            for s in range(3):
                ep.log_step(screenshot(s), response())
                if k % 2:
                    time.sleep(0.15)  # longer than max_age_s: its next start is a boundary
            ep.finish(success=True)
        rec.close()
    finally:
        committer.stage_hook = None
        stop.set()
        thread.join(timeout=60)
    assert len(at_commit) >= 2 and set(at_commit) == {0}, at_commit
    assert len(polled) >= 5 and set(polled) == {0}, polled
    lake = Lake(s3_lake)
    got = lake.sql("select episode_id, count(*) n, count(distinct step) d from steps group by 1 order by 1").to_pylist()
    assert got == [{"episode_id": i, "n": 3, "d": 3} for i in sorted(ids)]
    episodes = lake.sql("select episode_id, status from episodes order by 1").to_pylist()
    assert episodes == [{"episode_id": i, "status": "finished"} for i in sorted(ids)]
    ds = tables.dataset(layout.table_path(lake.location, "episodes"))
    kinds = [type(t.operation).__name__ for t in ds.get_transactions() if t is not None]
    assert "Append" in kinds and "Update" in kinds, kinds  # first rows appended, finish rows merged
