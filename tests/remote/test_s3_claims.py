"""Claims of a machine that is gone: `elake recover --release-claims HOST` frees the
episodes a dead machine's writers held on an S3 lake, and refuses for this machine while
its writer still runs; a recorder's releases share deletes; a delete never races claims
being placed on the same machine."""

from __future__ import annotations

import socket
import threading

import pyarrow as pa
import pytest

from episodelake.api.cli import main
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Conflict, Lake
from episodelake.lake.storage import claims, layout, tables
from tests.factories import response, screenshot


def claim_rows(lake: Lake) -> list[dict]:
    return sorted(tables.dataset(lake.location / f"{layout.CLAIMS_TABLE}.lance").to_table(
        columns=["episode_id", "host"]).to_pylist(), key=lambda r: r["episode_id"])


def test_a_gone_machines_claims_are_released(s3_lake, monkeypatch, capsys):
    lake = Lake(s3_lake)
    here = socket.gethostname()
    # a writer on node-a claims two episodes, then the node dies with its spool
    with monkeypatch.context() as m:
        m.setattr(socket, "gethostname", lambda: "node-a")
        assert claims.take(lake.location, "ep-a1", "writer-a") is not None
        assert claims.take(lake.location, "ep-a2", "writer-a") is not None
    rec = Recorder(lake, anchor=None, image_checks="structure")
    lost = rec.start_episode("t", episode_id="ep-a1")  # asks the store nothing: settled by the writer
    rec.flush()
    with pytest.raises(Conflict, match="lost when the claim was settled: recorder writer-a on node-a claimed it first"):
        lost.log_step(screenshot(0), response())
    with pytest.raises(Conflict, match="its claim was lost"):  # not again under this recorder
        rec.start_episode("t", episode_id="ep-a1")

    # this machine's running writer holds ep-b: releasing this machine's claims is refused
    episode = rec.start_episode("t", episode_id="ep-b")
    episode.log_step(screenshot(0), response())
    rec.flush()  # its claim settled and its step committed (the claim is held until it finishes)
    assert main(["--lake", s3_lake, "recover", "--release-claims", here]) != 0
    assert "running or left a spool here" in capsys.readouterr().err
    assert [r["episode_id"] for r in claim_rows(lake)] == ["ep-a1", "ep-a2", "ep-b"]

    assert main(["--lake", s3_lake, "recover", "--release-claims", "node-a"]) == 0
    assert "released 2 claim(s) of node-a on episode(s) ep-a1, ep-a2" in capsys.readouterr().out
    assert claim_rows(lake) == [{"episode_id": "ep-b", "host": here}]
    episode.finish(success=True)
    rec.close()
    with Recorder(lake, anchor=None, image_checks="structure") as other:
        with other.start_episode("t", episode_id="ep-a1") as again:  # free again
            again.log_step(screenshot(1), response())
    assert claim_rows(lake) == []
    lake.invalidate()
    assert sorted(lake.sql("SELECT episode_id FROM episodes")["episode_id"].to_pylist()) == ["ep-a1", "ep-b"]
    # nothing left to release
    assert main(["--lake", s3_lake, "recover", "--release-claims", "node-a"]) == 0
    assert "released 0 claim(s) of node-a" in capsys.readouterr().out


def test_release_claims_needs_a_lake_on_an_object_store(lake, capsys):
    assert main(["--lake", str(lake.path), "recover", "--release-claims", "node-a"]) != 0
    assert "a lake in a local folder has no claims to release" in capsys.readouterr().err


def test_a_closing_recorder_releases_all_its_episodes_claims_in_one_delete(s3_lake):
    """A recorder that closes with finished episodes whose claims are still held lets go of
    them in one delete of `_claims`, not one per episode: with a fleet closing at once, a
    delete per episode queued every writer's close behind the others'."""
    lake = Lake(s3_lake)
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        for k in range(4):  # minted ids: their claims are written with the rows' first commit
            ep = rec.start_episode("t", f"goal {k}")
            ep.log_step(screenshot(k), response())
            ep.finish(success=True)
        rec.flush()  # rows and claims in the lake; the claims are released in the next batch
        for k in range(4, 8):
            ep = rec.start_episode("t", f"goal {k}")
            ep.log_step(screenshot(k), response())
            ep.finish(success=True)
        claims_table = tables.dataset(lake.location / f"{layout.CLAIMS_TABLE}.lance")
        before = claims_table.version
    after = tables.dataset(lake.location / f"{layout.CLAIMS_TABLE}.lance")
    assert claim_rows(lake) == []  # every claim released
    # the close: the last 4 claims placed (one append), the first 4 released (one delete), then
    # the last 4 released (one delete); one delete per episode would have made it 6
    assert after.version - before <= 3, f"{after.version - before} commits of _claims at close"


def test_a_delete_of_claims_waits_while_this_machine_places_claims(s3_lake):
    """Deleting claims holds the machine's lock for placing claims for its commit, so the
    committer's append of new claims never races a release (an append racing a delete is
    rebased after a failed conditional write: at 8 writers it took 0.7-1.5 s, not 0.2 s)."""
    lake = Lake(s3_lake)
    loc = lake.location
    claims.append_rows(loc, pa.Table.from_pylist([claims._row(loc, "e1", "h", "tok-1")], schema=claims.CLAIMS_SCHEMA))
    deleted = threading.Event()

    def release() -> None:
        claims._delete(loc, "token = 'tok-1'", "release claim on episode e1")
        deleted.set()

    with tables.file_lock(claims.shared_lock(loc, layout.CLAIMS_TABLE, "place")):  # claims being placed
        thread = threading.Thread(target=release)
        thread.start()
        assert not deleted.wait(1.0)  # the delete waits its turn
        assert [r["episode_id"] for r in claim_rows(lake)] == ["e1"]
    thread.join(60)
    assert deleted.is_set() and claim_rows(lake) == []
