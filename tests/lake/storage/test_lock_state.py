"""One probe says whether the holder of a lock file on this machine is alive: spool writers
(`spool.writer_state`, which episode claims ask) and job owners (`jobs.owner_alive`) both
answer through `layout.lock_state`, so they agree in every state."""

from __future__ import annotations

import fcntl

from episodelake.lake.ops.jobs import Owner, owner_alive
from episodelake.lake.storage import layout, spool


def test_writer_and_job_owner_probes_agree_in_every_state(tmp_path):
    folder = tmp_path / "writer-1"
    owner = Owner(tmp_path)
    lock = folder / layout.SPOOL_LOCK
    # alive: the holder keeps an flock on its file
    folder.mkdir()
    held = open(lock, "a+")  # noqa: SIM115 - held across the checks below
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert layout.lock_state(lock) == spool.writer_state(folder) == "alive"
    assert owner_alive(tmp_path, owner.name) is True
    # dead: the file is left, nobody holds it (a crashed process)
    held.close()
    owner._fh.close()
    owner._fh = None
    assert layout.lock_state(lock) == spool.writer_state(folder) == "dead"
    assert owner_alive(tmp_path, owner.name) is False
    # gone: no file (closed cleanly, or its leftovers dealt with); asking creates nothing
    lock.unlink()
    owner.path.unlink()
    assert layout.lock_state(lock) == spool.writer_state(folder) == "gone"
    assert owner_alive(tmp_path, owner.name) is False and owner_alive(tmp_path, None) is False
    assert not lock.exists() and not owner.path.exists()
    assert spool.writer_state(tmp_path / "no-such-writer") == "gone"
