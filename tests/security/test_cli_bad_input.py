"""Bad input on the command line is one clear line naming the flag, and changes nothing:
a spool folder that is not one, negative counts, an empty tag, a bad store timeout (a store
that never answers at open: tests/remote/test_s3_open_timeout.py)."""

from __future__ import annotations

import pytest

from episodelake.api import cli
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from tests import factories


@pytest.fixture
def recorded(lake: Lake) -> Lake:
    with Recorder(lake, anchor=None, run_id="r1") as rec:
        with rec.start_episode("sms", "send a text") as ep:
            ep.log_step(factories.screenshot(0), factories.response("click"))
            ep.finish(success=True)
    return lake


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("argv,message", [
    (["recover", "--spool", "/nonexistent-spool"], "--spool /nonexistent-spool: no such folder"),
    (["recover", "--spool", "/"], "--spool /: not a spool folder"),
    (["recover", "--spool", "/etc/hostname"], "--spool /etc/hostname: not a folder"),
    (["optimize", "--prune-days", "-1"], "--prune-days: give 0 or more days, not -1"),
    (["optimize", "--prune-days", "inf"], "--prune-days: give 0 or more days"),
    (["tag", ""], "tag"),
    (["tag", "   "], "tag"),
    (["sql", "select 1", "--max-rows", "-1"], "--max-rows: give 1 or more rows, not -1"),
    (["sql", "select 1", "--max-rows", "0"], "--max-rows: give 1 or more rows, not 0"),
])
def test_bad_input_is_one_line_and_changes_nothing(recorded, capsys, argv, message):
    versions, tags = recorded.current_versions(), recorded.tags()
    assert cli.main(["--lake", str(recorded.path), *argv]) == 1
    assert message in one_line(capsys)
    fresh = Lake(recorded.path, create=False)
    assert fresh.current_versions() == versions and fresh.tags() == tags


def test_an_empty_folder_or_a_folder_of_other_things_is_not_a_spool(recorded, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["--lake", str(recorded.path), "recover", "--spool", str(empty)]) == 1
    assert "not a spool folder (it is empty)" in one_line(capsys)
    other = tmp_path / "other"
    (other / "photos").mkdir(parents=True)
    (other / "photos" / "lock").write_text("not a writer's")
    (other / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    assert cli.main(["--lake", str(recorded.path), "recover", "--spool", str(other)]) == 1
    assert "'photos' is not a writer's spool" in one_line(capsys)


def test_a_real_spool_folder_is_replayed(recorded, tmp_path, capsys):
    spool = tmp_path / "copied"
    (spool / "writer-1").mkdir(parents=True)
    (spool / "writer-1" / "lock").write_text("")
    assert cli.main(["--lake", str(recorded.path), "recover", "--spool", str(spool)]) in (0, None)
    assert "replayed 0 row(s)" in capsys.readouterr().out


def test_optimize_can_keep_every_version(recorded, capsys):
    assert cli.main(["--lake", str(recorded.path), "optimize", "--keep-versions"]) in (0, None)
    assert "episodes" in capsys.readouterr().out


def test_the_open_timeout_setting_is_checked(monkeypatch, capsys):
    monkeypatch.setenv("ELAKE_STORE_OPEN_TIMEOUT_S", "-3")
    assert cli.main(["--lake", "s3://bucket/lake", "info"]) == 1
    assert "ELAKE_STORE_OPEN_TIMEOUT_S: give a number of seconds above 0, not '-3'" in one_line(capsys)
