"""The ELAKE_* environment: read once (`EnvSettings`), the defaults of the command line and the
server, a bad value refused naming its variable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from episodelake.api import cli
from episodelake.api.settings import EnvSettings, Settings
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.store import DEFAULT_LAKE

VARIABLES = ("ELAKE_LAKE", "ELAKE_TOKEN", "ELAKE_CORS_ORIGINS", "ELAKE_ENV_TOKEN")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def lake_of_info(capsys, *argv: str) -> Path:
    assert cli.main([*argv, "info", "--json"]) == 0
    return Path(json.loads(capsys.readouterr().out)["lake"])


def test_elake_lake_is_the_default_lake_and_lake_overrides_it(tmp_path, monkeypatch, capsys):
    from_env, given = Lake(tmp_path / "from-env").path, Lake(tmp_path / "given").path
    monkeypatch.setenv("ELAKE_LAKE", str(from_env))
    assert lake_of_info(capsys) == from_env
    assert lake_of_info(capsys, "--lake", str(given)) == given
    monkeypatch.setenv("ELAKE_LAKE", "")  # empty counts as unset: the default folder
    assert EnvSettings.load().lake == DEFAULT_LAKE


def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("ELAKE_TOKEN", "s3cret")
    assert cli.main(["--lake", str(tmp_path), "info"]) == 1
    err = capsys.readouterr().err
    assert err == ("elake info: $ELAKE_TOKEN: string should have at least 16 characters "
                   "(fix or unset the variable)\n")
    assert "s3cret" not in err  # a token is never echoed
    with pytest.raises(InvalidInput, match=r"^\$ELAKE_TOKEN: "):
        Settings.from_env()


def test_the_server_takes_the_environment_and_the_command_line_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("ELAKE_LAKE", str(tmp_path))
    monkeypatch.setenv("ELAKE_TOKEN", "t" * 16)
    monkeypatch.setenv("ELAKE_CORS_ORIGINS", "http://localhost:5173, https://app.example ,")
    settings = Settings.from_env()
    assert (settings.lake, settings.token) == (str(tmp_path), "t" * 16)
    assert settings.cors_origins == ("http://localhost:5173", "https://app.example")
    assert Settings.from_env(lake=tmp_path / "other", host="0.0.0.0").lake == str(tmp_path / "other")
    # Built directly, Settings takes only what it is given, whatever the shell exports.
    assert Settings(lake=tmp_path).token is None and Settings(lake=tmp_path).cors_origins == ()


def test_the_environment_servers_token(monkeypatch):
    assert EnvSettings.load().env_token is None
    monkeypatch.setenv("ELAKE_ENV_TOKEN", "abc")
    assert EnvSettings.load().env_token == "abc"
    assert EnvSettings.variable("env_token") == "ELAKE_ENV_TOKEN"
