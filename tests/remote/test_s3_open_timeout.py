"""A store that never answers while a lake opens: the command line gives up after
`ELAKE_STORE_OPEN_TIMEOUT_S` with one line naming the lake and the setting (a client looking
for credentials that are not there used to hang for minutes)."""

from __future__ import annotations

import time

from episodelake.api import cli
from episodelake.lake import Lake


def test_a_store_that_never_answers_at_open_is_a_one_line_error(s3_proxied_lake, s3_proxy, monkeypatch, capsys):
    Lake(s3_proxied_lake)  # the lake exists
    monkeypatch.setenv("ELAKE_STORE_OPEN_TIMEOUT_S", "2")
    with s3_proxy.hanging():
        started = time.monotonic()
        assert cli.main(["--lake", s3_proxied_lake, "info"]) == 1
        took = time.monotonic() - started
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "no answer within 2 s" in err and "ELAKE_STORE_OPEN_TIMEOUT_S" in err and s3_proxied_lake in err
    assert took < 30, took
