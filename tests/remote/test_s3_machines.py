"""Many machines, one lake on S3 (moto's real S3 API), played on one box: each machine is
its own spool root (`ELAKE_SPOOL`) and machine id (`ELAKE_MACHINE_ID`), with its own
committer. 4 machines x 2 writer processes store every row once; two machines given the
same id are one clear error naming the setting, and lose nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.storage import claims, layout, tables
from tests.factories import child_env, response, screenshot
from tests.remote.test_shared_commits import FLEET_WRITER


def _spools_left(root) -> list[str]:
    return [p.name for p in root.iterdir() if not p.name.startswith(".")] if root.exists() else []


def test_four_machines_of_two_writers_store_every_row_once(s3_lake, s3_env, tmp_path):
    Lake(s3_lake)
    procs = []
    for k in range(8):
        machine = k % 4
        env = {**s3_env, layout.SPOOL_ENV: str(tmp_path / f"machine-{machine}"),
               layout.MACHINE_ENV: f"machine-{machine}"}
        procs.append(subprocess.Popen([sys.executable, "-c", FLEET_WRITER.format(lake=s3_lake, episodes=4, index=k)],
                                      env=child_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0 and out.strip() == "closed", err
    lake = Lake(s3_lake)
    rows = lake.sql("select count(*) n, count(distinct (episode_id, step)) d from steps").to_pylist()[0]
    assert rows == {"n": 8 * 4 * 3, "d": 8 * 4 * 3}  # 0 lost, 0 doubled
    assert lake.sql("select count(*) from episodes where status = 'finished'")[0][0].as_py() == 32
    assert tables.dataset(layout.table_path(lake.location, layout.CLAIMS_TABLE)).count_rows() == 0
    names = tables.dataset(layout.table_path(lake.location, layout.MACHINES_TABLE)).to_table().to_pylist()
    assert sorted(r["machine"] for r in names) == [f"machine-{m}" for m in range(4)]  # each id taken once
    for m in range(4):
        loc = lake.location
        assert _spools_left(tmp_path / f"machine-{m}" / loc.key() / "spool") == []


def test_two_machines_given_one_machine_id_are_one_clear_error_and_lose_nothing(s3_lake, monkeypatch, tmp_path):
    monkeypatch.setenv(layout.MACHINE_ENV, "node-x")
    monkeypatch.setenv(layout.SPOOL_ENV, str(tmp_path / "machine-a"))
    with Recorder(s3_lake, image_checks="structure", anchor=None) as first, first.start_episode("t") as ep:
        ep.log_step(screenshot(0), response())

    monkeypatch.setenv(layout.SPOOL_ENV, str(tmp_path / "machine-b"))  # another machine, the same id
    second = Recorder(s3_lake, image_checks="structure", anchor=None)
    ep = second.start_episode("t", episode_id="on-b")
    for s in range(3):
        ep.log_step(screenshot(s), response())  # acknowledged: in machine b's spool
    with pytest.raises(claims.MachineIdTaken) as taken:
        second.flush()
    text = str(taken.value)
    assert "\n" not in text and "machine id 'node-x' (ELAKE_MACHINE_ID" in text and "already taken" in text
    with pytest.raises(claims.MachineIdTaken):
        ep.log_step(screenshot(3), response())  # refused, not recorded
    with pytest.raises(claims.MachineIdTaken):
        second.close()
    assert Lake(s3_lake).sql("select count(*) from steps where episode_id = 'on-b'")[0][0].as_py() == 0

    monkeypatch.setenv(layout.MACHINE_ENV, "node-y")  # fixed: machine b's next writer replays its spool
    with Recorder(s3_lake, image_checks="structure", anchor=None) as again:
        again.writer.replay_done.wait(60)
        again.flush()
    lake = Lake(s3_lake)
    assert lake.sql("select count(*) n, count(distinct step) d from steps where episode_id = 'on-b'").to_pylist() == [
        {"n": 3, "d": 3}]
