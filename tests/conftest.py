
import pytest

from episodelake.lake import Lake  # noqa: E402


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")
