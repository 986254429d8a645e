"""Settings refuse bad values in the words every spec uses (`spec_model.describe`): the field,
what is wrong and the value given, except where the value may be a secret."""

from __future__ import annotations

import pytest

from episodelake.api.settings import EnvSettings, Settings
from episodelake.lake.storage.errors import InvalidInput


def test_server_settings_name_the_field_and_the_value_given(tmp_path, monkeypatch):
    for name in ("ELAKE_TOKEN", "ELAKE_CORS_ORIGINS", "ELAKE_LAKE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(InvalidInput) as refused:
        Settings.from_env(lake=tmp_path, port=70000, sql_max_rows=0)
    assert str(refused.value) == ("server settings: port: input should be less than or equal to 65535, "
                                  "not 70000; sql_max_rows: input should be greater than or equal to 1, not 0")


def test_a_token_is_never_echoed_wherever_it_comes_from(tmp_path, monkeypatch):
    with pytest.raises(InvalidInput, match=r"^server settings: token: string should have at least 16 "
                                           r"characters$") as refused:
        Settings.from_env(lake=tmp_path, token="s3cret")
    assert "s3cret" not in str(refused.value)
    monkeypatch.setenv("ELAKE_TOKEN", "s3cret")
    with pytest.raises(InvalidInput, match=r"^\$ELAKE_TOKEN: string should have at least 16 characters "
                                           r"\(fix or unset the variable\)$"):
        EnvSettings.load()
