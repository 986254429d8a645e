"""Every member of every extension registry is listed in the manual's Extending page, so the
page cannot fall behind what the product can be extended with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from episodelake.collectors.envs.devices import DEVICES
from episodelake.collectors.envs.suites import SUITES
from episodelake.lake.derive.derivations import DERIVATIONS
from episodelake.lake.export.formats import FORMATS
from episodelake.lake.vocab.families import families as response_formats
from episodelake.trainer.advantages import ESTIMATORS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def listed(section: str) -> set[str]:
    """The names in the first column of the table under the `## section` heading."""
    text = PAGE.read_text()
    match = re.search(rf"^## {re.escape(section)}.*?$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/extending.md has no section {section!r}"
    return set(re.findall(r"^\| `([^`]+)` \|", match.group(1), re.M))


@pytest.mark.parametrize("section, members", [
    ("Export formats", lambda: set(FORMATS)),
    ("Derived step columns", lambda: set(DERIVATIONS)),
    ("Task suites", lambda: set(SUITES)),
    ("Model families", lambda: set(response_formats())),
    ("Devices", lambda: set(DEVICES)),
    ("Advantage estimators", lambda: set(ESTIMATORS)),
])
def test_each_registry_member_is_listed_on_the_extending_page(section, members):
    assert listed(section) == members()
