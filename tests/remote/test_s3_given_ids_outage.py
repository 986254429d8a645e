"""Episodes with ids the caller gives keep starting while the store is down: the claim is
taken provisionally (a note in the writer's spool) and settled before any of the episode's
rows is committed. The rule holds as before: two writers never both store one id; a lost
claim's rows are set aside, never stored under that id, and `elake recover` can store them
under a new id. The outage is a network block in front of moto's real S3 API."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from episodelake.api.cli import main
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Conflict, Lake, WriterOptions
from episodelake.lake.storage import claims, conflicts, layout, tables
from tests.factories import child_env, response, screenshot
from tests.remote.proxy import flush_once_back
from tests.waiting import wait_for

OPTIONS = WriterOptions(batch_rows=4, max_age_s=0.2)


def steps_of(lake_uri: str, episode_id: str) -> list[int]:
    rows = Lake(lake_uri).sql(f"select step from steps where episode_id = '{episode_id}' order by step")
    return [r["step"] for r in rows.to_pylist()]


def claim_rows(lake_uri: str) -> int:
    location = Lake(lake_uri).location
    return tables.dataset(layout.table_path(location, layout.CLAIMS_TABLE)).count_rows()


def notes(rec: Recorder) -> list[str]:
    return sorted(p.name for p in rec.writer._spool.dir.glob(f"{claims.NOTE_PREFIX}*"))


def test_a_given_id_starts_during_an_outage_and_is_stored_once_back(s3_proxied_lake, s3_proxy):
    rec = Recorder(s3_proxied_lake, image_checks="structure", options=OPTIONS)
    with s3_proxy.blocked():
        first = rec.start_episode("t", episode_id="given-1")  # finds the store down itself
        for s in range(6):
            first.log_step(screenshot(s % 5), response())
        second = rec.start_episode("t", episode_id="given-2")  # the recorder knows: asks the store nothing
        second.log_step(screenshot(0), response())
        assert len(notes(rec)) == 2  # both claims wait, noted in the spool
        first.finish(success=True)
    flush_once_back(rec)
    assert notes(rec) == []  # settled
    second.finish(success=False)
    rec.close()
    assert steps_of(s3_proxied_lake, "given-1") == list(range(6))
    assert steps_of(s3_proxied_lake, "given-2") == [0]
    assert claim_rows(s3_proxied_lake) == 0


def test_a_given_id_starts_while_the_store_hangs_without_asking_it(s3_proxied_lake, s3_proxy):
    """A store that accepts connections and never answers held a claim for minutes (60 s per
    request, retried); a given id's claim is taken provisionally without asking the store at
    all, so neither start waits. Generous bound: far below one request's timeout."""
    rec = Recorder(s3_proxied_lake, image_checks="structure", options=OPTIONS)
    with s3_proxy.hanging():
        sent = s3_proxy.sent
        started = time.monotonic()
        ep = rec.start_episode("t", episode_id="through-a-hang")
        waited = time.monotonic() - started
        ep.log_step(screenshot(0), response())
        started = time.monotonic()
        second = rec.start_episode("t", episode_id="through-a-hang-2")
        waited_again = time.monotonic() - started
    assert waited < 1 and waited_again < 1, f"start_episode waited {waited:.1f} s / {waited_again:.1f} s on a hung store"
    flush_once_back(rec)
    ep.finish(success=True)
    second.finish(success=True)
    rec.close()
    assert sent <= s3_proxy.sent
    assert steps_of(s3_proxied_lake, "through-a-hang") == [0]
    assert Lake(s3_proxied_lake).episode("through-a-hang-2")["status"] == "finished"
    wait_for(lambda: claim_rows(s3_proxied_lake) == 0, 60, every_s=0.5, what="the claims' release")


def test_an_id_the_lake_already_holds_is_lost_when_settled_and_set_aside(s3_proxied_lake, s3_proxy, capsys):
    with Recorder(s3_proxied_lake, image_checks="structure", options=OPTIONS) as first:
        ep = first.start_episode("t", episode_id="dup")
        for s in range(2):
            ep.log_step(screenshot(s), response("first"))
        ep.finish(success=True)
    late = Recorder(s3_proxied_lake, image_checks="structure", options=OPTIONS)
    with s3_proxy.blocked():
        ep = late.start_episode("t", "the late one's goal", episode_id="dup")  # cannot be checked now
        for s in range(3):
            ep.log_step(screenshot(s), response("late"))
    flush_once_back(late)
    with pytest.raises(Conflict, match=r"episode dup: .* lost when the claim was settled: the lake already holds it"):
        ep.log_step(screenshot(4), response("late"))
    late.close()
    lake = Lake(s3_proxied_lake)
    assert steps_of(s3_proxied_lake, "dup") == [0, 1]  # the first recorder's, untouched
    assert {r["model_response"] for r in lake.steps("dup", columns=["model_response"]).to_pylist()} == {response("first")}
    kept = conflicts.listed(lake.location)
    assert [(k.episode_id, k.rows) for k in kept] == [("dup", {"episodes": 1, "steps": 3})]

    assert main(["--lake", s3_proxied_lake, "recover", "--restore-conflicts"]) == 0
    out = capsys.readouterr().out
    assert "restored set-aside episode dup as dup-" in out
    new_id = out.split("restored set-aside episode dup as ")[1].split()[0]
    assert steps_of(s3_proxied_lake, new_id) == [0, 1, 2]
    restored = Lake(s3_proxied_lake).episode(new_id)
    assert restored["task_goal"] == "the late one's goal" and json.loads(restored["extra"])["recorded_as"] == "dup"
    assert conflicts.listed(lake.location) == []


def test_two_writers_giving_one_id_during_an_outage_store_it_once(s3_proxied_lake, s3_proxy):
    a = Recorder(s3_proxied_lake, image_checks="structure", options=OPTIONS)
    b = Recorder(s3_proxied_lake, image_checks="structure", options=OPTIONS)
    with s3_proxy.blocked():
        ep_a = a.start_episode("t", episode_id="both")
        ep_b = b.start_episode("t", episode_id="both")
        for s in range(3):
            ep_a.log_step(screenshot(s), response("a"))
        for s in range(5):
            ep_b.log_step(screenshot(s), response("b"))
    flush_once_back(a)
    flush_once_back(b)
    outcomes = {}
    for name, ep in (("a", ep_a), ("b", ep_b)):
        try:
            ep.finish(success=True)
            outcomes[name] = "stored"
        except Conflict:
            outcomes[name] = "lost"
    a.close()
    b.close()
    assert sorted(outcomes.values()) == ["lost", "stored"]
    winner = next(n for n, o in outcomes.items() if o == "stored")
    lake = Lake(s3_proxied_lake)
    responses = {r["model_response"] for r in lake.steps("both", columns=["model_response"]).to_pylist()}
    assert responses == {response(winner)}
    assert steps_of(s3_proxied_lake, "both") == list(range(3 if winner == "a" else 5))
    assert [(k.episode_id, k.rows["steps"]) for k in conflicts.listed(lake.location)] == [
        ("both", 5 if winner == "a" else 3)]


DIES = textwrap.dedent("""
    import sys
    from tests.factories import response, screenshot
    from episodelake.collectors.record.recorder import Recorder
    from episodelake.lake import WriterOptions
    rec = Recorder({lake!r}, image_checks="structure", options=WriterOptions(batch_rows=4, max_age_s=0.3))
    print("ready", flush=True)
    sys.stdin.readline()
    ep = rec.start_episode("t", episode_id={episode_id!r})
    for s in range(4):
        ep.log_step(screenshot(s), response("dead"))
    print("acknowledged", flush=True)
    sys.stdin.readline()
""")


@pytest.mark.parametrize("taken_meanwhile", [False, True])
def test_a_writer_killed_with_its_claim_unsettled_is_settled_by_the_replay(s3_proxied_lake, s3_proxy, s3_env,
                                                                            taken_meanwhile, monkeypatch, tmp_path):
    episode_id = "unsettled"
    proc = subprocess.Popen([sys.executable, "-c", DIES.format(lake=s3_proxied_lake, episode_id=episode_id)],
                            env=child_env(s3_env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with s3_proxy.blocked():
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "acknowledged"  # its claim only a note in its spool
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
    finally:
        proc.kill()
    spool_root = layout.spool_root(Lake(s3_proxied_lake).location)
    assert list(spool_root.glob(f"*/{claims.NOTE_PREFIX}*"))  # the note outlived its writer
    if taken_meanwhile:  # a writer elsewhere (its own spool) stores the id before the dead one is replayed
        with monkeypatch.context() as elsewhere:
            elsewhere.setenv("ELAKE_SPOOL", str(tmp_path / "another-machine"))
            elsewhere.setenv("ELAKE_MACHINE_ID", "another-machine")
            with Recorder(s3_proxied_lake, image_checks="structure", options=OPTIONS) as rival:
                ep = rival.start_episode("t", episode_id=episode_id)
                ep.log_step(screenshot(0), response("rival"))
                ep.finish(success=True)
    lake = Lake(s3_proxied_lake)
    assert lake.recover()["problems"] == {}
    responses = {r["model_response"] for r in lake.steps(episode_id, columns=["model_response"]).to_pylist()}
    if taken_meanwhile:
        assert responses == {response("rival")} and steps_of(s3_proxied_lake, episode_id) == [0]
        assert [(k.episode_id, k.rows["steps"]) for k in conflicts.listed(lake.location)] == [(episode_id, 4)]
    else:
        assert responses == {response("dead")} and steps_of(s3_proxied_lake, episode_id) == [0, 1, 2, 3]
        assert conflicts.listed(lake.location) == []
        assert claim_rows(s3_proxied_lake) == 0
