import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from episodelake.lake import Lake  # noqa: E402


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")
