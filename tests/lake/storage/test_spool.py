"""The spool's byte-level guarantees on real files: torn records, failed writes, replay.

A spool segment is an Arrow IPC stream. These tests build damaged segments by hand (a record
cut short in the middle of a file, then good records after it, as a writer that kept going
after a failed write used to leave) and make real writes fail with a file-size limit, which
needs no privileges.
"""

from __future__ import annotations

import concurrent.futures
import errno
import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from episodelake.lake import Lake, LakeWriter, WriterOptions
from episodelake.lake.storage import schema
from episodelake.lake.storage.layout import SPOOL_LOCK, spool_root
from episodelake.lake.storage.spool import SpoolWriteError


def _batch(eid: str, steps: range) -> pa.RecordBatch:
    rows = [{"episode_id": eid, "step": n, "image": bytes([n % 251]) * 3000, "action_type": "click"}
            for n in steps]
    return pa.Table.from_pylist(rows, schema=schema.TABLES["steps"]).combine_chunks().to_batches()[0]


def _dead_writer_folder(lake: Lake, name: str = "4242-deadbeef0000"):
    folder = spool_root(lake.path) / name
    folder.mkdir(parents=True)
    (folder / SPOOL_LOCK).touch()
    return folder


def test_torn_record_mid_segment_keeps_the_good_records_around_it(lake):
    """A record cut short, then good records after it: replay keeps every whole record,
    drops only the torn bytes, does not crash, and keeps a copy of the damaged file."""
    head = schema.TABLES["steps"].serialize().to_pybytes()
    a = _batch("e1", range(0, 3)).serialize().to_pybytes()
    torn = _batch("e1", range(3, 6)).serialize().to_pybytes()
    c = _batch("e1", range(6, 9)).serialize().to_pybytes()
    d = _batch("e1", range(9, 12)).serialize().to_pybytes()
    tail = _batch("e1", range(12, 15)).serialize().to_pybytes()
    folder = _dead_writer_folder(lake)
    segment = folder / "steps-00000001.arrows"
    original = head + a + torn[: len(torn) // 2] + c + d + tail[: len(tail) // 3]
    segment.write_bytes(original)

    with LakeWriter(lake.path) as w:
        assert w.replayed == 9
    got = lake.sql("select step from steps order by step").column(0).to_pylist()
    assert got == [0, 1, 2, 6, 7, 8, 9, 10, 11]
    assert not folder.exists()
    kept = list((spool_root(lake.path) / ".damaged").iterdir())
    assert len(kept) == 1 and kept[0].read_bytes() == original


def test_torn_tail_is_dropped_quietly_and_the_rest_replayed(lake):
    head = schema.TABLES["steps"].serialize().to_pybytes()
    a = _batch("e1", range(0, 4)).serialize().to_pybytes()
    tail = _batch("e1", range(4, 8)).serialize().to_pybytes()
    for cut in (1, 7, 100, len(tail) - 1):
        folder = _dead_writer_folder(lake, f"4242-cut{cut:08d}")
        (folder / "steps-00000001.arrows").write_bytes(head + a + tail[:cut])
    # a segment whose schema header itself was cut: nothing in it was ever acknowledged
    folder = _dead_writer_folder(lake, "4242-headonly")
    (folder / "steps-00000001.arrows").write_bytes(head[:10])
    report = lake.recover()
    assert report["problems"] == {} and report["torn_tails"] == 5 and "damaged" not in report
    assert report["rows_replayed"] == 16  # the same 4 rows from each of 4 segments, deduplicated
    assert lake.sql("select count(*) from steps").column(0)[0].as_py() == 4
    assert not (spool_root(lake.path) / ".damaged").exists()


FAILING_WRITES = textwrap.dedent(
    """
    import os, resource, signal, sys
    from pathlib import Path
    from episodelake.lake import LakeWriter, WriterOptions
    from episodelake.lake.storage.spool import SpoolWriteError

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    w = LakeWriter({lake!r}, WriterOptions(batch_rows=10_000, max_age_s=600))
    image = os.urandom(20_000)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, hard))
    acked, errors = [], []
    for n in range(12):
        try:
            w.append("steps", {{"episode_id": "e1", "step": n, "image": image, "action_type": "click"}})
            acked.append(n)
        except SpoolWriteError as exc:
            errors.append(str(exc))
    segment = next(Path(w._spool.dir).glob("steps-*.arrows"))
    size_when_failing = segment.stat().st_size
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    for n in range(12, 20):
        w.append("steps", {{"episode_id": "e1", "step": n, "image": image, "action_type": "click"}})
        acked.append(n)
    # simulate a crash: every acknowledged row must come back from the spool alone
    w._stop.set()
    w._spool._lock.close()
    print(repr((acked, errors, size_when_failing)))
    """
)


def test_failed_spool_write_is_not_acknowledged_and_leaves_no_torn_record(lake):
    """Writes fail half way (a file-size limit, like a full disk): each failure raises a
    clear error, the segment is cut back to its last whole record, later rows go after
    it, and a crash afterwards replays exactly the acknowledged rows."""
    code = FAILING_WRITES.format(lake=str(lake.path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    acked, errors, size_when_failing = eval(proc.stdout.strip().splitlines()[-1])
    assert errors, "the file-size limit never made a spool write fail"
    assert all("spool" in e and "not recorded" in e for e in errors), errors
    assert size_when_failing <= 150_000
    assert len(acked) == 20 - len(errors)
    report = Lake(lake.path).recover()
    assert report["problems"] == {}
    got = lake.sql("select step from steps order by step").column(0).to_pylist()
    assert got == acked
    assert not (spool_root(lake.path) / ".damaged").exists()


@pytest.mark.parametrize("durability", ["process", "machine"])
def test_spool_segments_stay_readable_arrow_streams(lake, durability):
    """The spool stays a plain Arrow IPC stream that any Arrow reader opens."""
    import pyarrow.ipc as ipc

    w = lake.writer(WriterOptions(batch_rows=10_000, max_age_s=600, durability=durability))
    w.append("steps", {"episode_id": "e1", "step": 0, "image": b"x", "action_type": "click"})
    w.append_rows("steps", [{"episode_id": "e1", "step": n, "image": b"y", "action_type": "click"}
                            for n in (1, 2)])
    segment = next(w._spool.dir.glob("steps-*.arrows"))
    with ipc.open_stream(pa.py_buffer(segment.read_bytes())) as reader:
        assert reader.read_all().column("step").to_pylist() == [0, 1, 2]
    w.close()
    assert os.listdir(spool_root(lake.path)) == []


def _raise_spool_error(path: str) -> None:
    raise SpoolWriteError(Path(path), 20_000, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))


def test_a_spool_error_raised_in_a_worker_process_reaches_the_caller_whole(tmp_path):
    """A collector pool or a Ray task that hits a full disk hands its caller this error, with
    its message and sizes; it used to arrive as a TypeError (its constructor's arguments are
    not its args), which also left a multiprocessing pool hung."""
    segment = tmp_path / "steps-1.arrows"
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        future = pool.submit(_raise_spool_error, str(segment))
        with pytest.raises(SpoolWriteError) as caught:
            future.result(timeout=60)
    exc = caught.value
    assert str(segment) in str(exc) and "No space left on device" in str(exc)
    assert "free at least 0.02 MB on that disk" in str(exc)
    assert exc.needed_bytes == 20_000 and exc.errno == errno.ENOSPC and exc.free_bytes > 0
