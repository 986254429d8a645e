"""No recorder call waits on the store (issue 34): `Recorder(...)` opens, `start_episode`
(ids minted or given) and `finish()` (past the 64th episode too) are local appends while
the store refuses connections or hangs; `flush(timeout=)` and `close()` are where a caller
chooses to wait, and they say how much is left. moto's real S3 API behind the tests' TCP
proxy; behaviour, not timing: the bounds are generous (each call takes milliseconds)."""

from __future__ import annotations

import time

import pytest

from episodelake.collectors.record.recorder import SETTLE_AFTER, Recorder
from episodelake.lake import InvalidInput, Lake, WriterOptions
from episodelake.lake.storage import layout, spool, tables
from episodelake.lake.storage.writer import CommitFailed
from tests.factories import response, screenshot
from tests.remote.proxy import flush_once_back
from tests.waiting import wait_for

#: Far above a local append (milliseconds), far below one request to a hung store (seconds).
SLOW_S = 1.0
OPTIONS = WriterOptions(batch_rows=8, max_age_s=0.3)


def _outage(proxy, kind: str):
    return proxy.blocked() if kind == "refused" else proxy.hanging()


def _timed(fn, *args, **kwargs):
    started = time.monotonic()
    result = fn(*args, **kwargs)
    return result, time.monotonic() - started


def _stored(uri: str, ids: list[str]) -> dict[str, tuple[int, int]]:
    got = Lake(uri).sql("select episode_id, count(*) n, count(distinct step) d from steps group by 1").to_pylist()
    return {r["episode_id"]: (r["n"], r["d"]) for r in got if r["episode_id"] in ids}


def _claim_rows(uri: str) -> int:
    loc = Lake(uri).location
    if not tables.has_table(loc, layout.CLAIMS_TABLE):
        return 0
    return tables.dataset(layout.table_path(loc, layout.CLAIMS_TABLE)).count_rows()


def _open_once(uri: str) -> None:
    """This machine has opened the lake before (what it noted then lets it open offline)."""
    with Recorder(uri, image_checks="structure", anchor=None, options=OPTIONS) as rec:
        with rec.start_episode("warm") as ep:
            ep.log_step(screenshot(0), response())


#: What the machine knows of the lake when the outage starts: it opened it before; it never
#: did (a machine joining a fleet: another machine made the lake); nobody did (no lake yet).
MACHINES = ["opened before", "new machine", "new lake"]


@pytest.mark.parametrize(("outage", "machine"), [("refused", m) for m in MACHINES] + [("hung", MACHINES[0])])
def test_a_recorder_opens_and_records_during_an_outage_and_loses_nothing(
        s3_proxied_lake, s3_proxy, outage, machine, monkeypatch, tmp_path):
    if machine != "new lake":
        _open_once(s3_proxied_lake)
    if machine == "new machine":
        monkeypatch.setenv(layout.SPOOL_ENV, str(tmp_path / "another-machine"))
        monkeypatch.setenv(layout.MACHINE_ENV, "another-machine")
    recorded: dict[str, int] = {}
    with _outage(s3_proxy, outage):
        sent = s3_proxy.sent
        rec, took = _timed(Recorder, s3_proxied_lake, image_checks="structure", anchor=None, options=OPTIONS)
        assert took < SLOW_S, f"Recorder() waited {took:.2f} s on a store that is {outage}"
        slowest = 0.0
        for k in range(6):
            given = f"given-{k}" if k % 2 else None  # ids of both kinds
            ep, took = _timed(rec.start_episode, "t", "during the outage", episode_id=given)
            slowest = max(slowest, took)
            for n in range(3):
                _, took = _timed(ep.log_step, screenshot(n), response())
                slowest = max(slowest, took)
            _, took = _timed(ep.finish, success=True)
            slowest = max(slowest, took)
            recorded[ep.episode_id] = 3
        assert slowest < SLOW_S, f"a call waited {slowest:.2f} s on a store that is {outage}"
        assert s3_proxy.sent == sent or outage == "hung"  # refused: nothing got through to it
    flush_once_back(rec)
    rec.close()
    stored = _stored(s3_proxied_lake, list(recorded))
    assert stored == {e: (n, n) for e, n in recorded.items()}  # 0 lost, 0 doubled
    lake = Lake(s3_proxied_lake)
    finished = lake.sql("select count(*) from episodes where status = 'finished'")[0][0].as_py()
    assert finished == len(recorded) + (machine != "new lake")
    wait_for(lambda: _claim_rows(s3_proxied_lake) == 0, 60, every_s=0.5, what="the claims' release")


def test_finish_past_the_64th_episode_never_waits_on_the_store(s3_proxied_lake, s3_proxy):
    """Every 64th `finish()` used to flush on the caller's thread (10-22 s, or `CommitFailed`
    while the store was down, or 363 s on a hung store): now the writer's thread lets go of
    the finished episodes' claims once their rows are committed."""
    _open_once(s3_proxied_lake)
    rec = Recorder(s3_proxied_lake, image_checks="structure", anchor=None, options=OPTIONS)
    episodes = SETTLE_AFTER + 8
    ids = []
    slowest = 0.0
    with s3_proxy.blocked():
        for k in range(episodes):
            ep = rec.start_episode("t", episode_id=f"many-{k:03d}" if k % 2 else None)
            ep.log_step(screenshot(k % 5), response())
            _, took = _timed(ep.finish, success=True)
            slowest = max(slowest, took)
            ids.append(ep.episode_id)
    assert slowest < SLOW_S, f"a finish() waited {slowest:.2f} s on the store"
    flush_once_back(rec)
    wait_for(lambda: not rec._settling, 60, every_s=0.2, what="finished episodes let go once committed")
    rec.close()
    assert _stored(s3_proxied_lake, ids) == dict.fromkeys(ids, (1, 1))
    wait_for(lambda: _claim_rows(s3_proxied_lake) == 0, 60, every_s=0.5, what="the claims' release")


def test_flush_with_a_timeout_says_how_much_is_left_and_close_keeps_it(s3_proxied_lake, s3_proxy):
    _open_once(s3_proxied_lake)
    rec = Recorder(s3_proxied_lake, image_checks="structure", anchor=None, options=OPTIONS)
    ep = rec.start_episode("t", episode_id="waits")
    for n in range(5):
        ep.log_step(screenshot(n), response())
    with s3_proxy.blocked():
        with pytest.raises(CommitFailed, match=r"not committed within 1 s.* row\(s\) \(.*\) stay in this writer's spool") as failed:
            _, took = _timed(rec.flush, timeout=1)
        assert "retried in the background" in str(failed.value)
    flush_once_back(rec)
    ep.finish(success=True)
    rec.close()
    assert _stored(s3_proxied_lake, ["waits"]) == {"waits": (5, 5)}


def test_a_backlog_bound_smaller_than_one_step_is_one_clear_error(s3_lake):
    rec = Recorder(s3_lake, image_checks="structure", anchor=None,
                   options=WriterOptions(max_backlog_bytes=1_000))
    ep = rec.start_episode("t", episode_id="tiny-bound")
    with pytest.raises(InvalidInput, match=r"larger than WriterOptions\.max_backlog_bytes = 1000 bytes") as refused:
        ep.log_step(screenshot(0), response())
    assert "\n" not in str(refused.value) and "not recorded" in str(refused.value)
    rec.close()
    assert _stored(s3_lake, ["tiny-bound"]) == {}


def test_a_spool_folder_that_is_not_writable_is_one_clear_error_naming_the_setting(s3_lake, monkeypatch, tmp_path):
    in_the_way = tmp_path / "not-a-folder"
    in_the_way.write_text("a file where the spool folder should be")
    monkeypatch.setenv(layout.SPOOL_ENV, str(in_the_way))
    with pytest.raises(spool.SpoolWriteError, match=r"not a writable folder .*point ELAKE_SPOOL at a writable folder") as refused:
        Recorder(s3_lake, image_checks="structure", anchor=None)
    assert "\n" not in str(refused.value)


def test_a_recorder_on_a_bucket_that_does_not_exist_opens_and_its_close_names_the_lake(s3_lake, caplog):
    """The open asks the store nothing, so a wrong bucket shows at the first commit (the
    writer's warning) and at `close()`, one line naming the lake; the steps stay in the spool."""
    uri = "s3://no-such-bucket-here/lake"
    rec = Recorder(uri, image_checks="structure", anchor=None, options=OPTIONS)
    ep = rec.start_episode("t", episode_id="nowhere")
    ep.log_step(screenshot(0), response())
    ep.finish(success=True)
    with pytest.raises(CommitFailed, match=r"bucket does not exist") as failed:
        rec.close()
    assert uri in str(failed.value) and "spool" in str(failed.value)
    assert any("no-such-bucket-here" in r.getMessage() and "bucket does not exist" in r.getMessage()
               for r in caplog.records if r.name.endswith("writer"))
    folder = layout.spool_root(Lake(uri, recall=True).location)
    assert any(folder.rglob("*")), "the recorded step left the spool"
