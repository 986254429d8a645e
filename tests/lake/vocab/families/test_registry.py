"""The model-family registry: every family is documented and parses its own example; a family
with no documentation is refused; auto-detection picks each detectable family for its example."""

from __future__ import annotations

import dataclasses
import re

import pytest

from episodelake.lake.vocab import families
from episodelake.lake.vocab.families import (
    FAMILIES,
    ModelFamily,
    ParsedAction,
    get_family,
    parse_response,
    register,
)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_each_family_is_documented_and_parses_its_example(name):
    family = get_family(name)
    assert family.summary.strip() and (family.doc or "").strip()
    listed = families.__doc__.split("Registered families", 1)[1].split("The action record", 1)[0]
    assert re.search(rf"^- ``{re.escape(name)}``: ", listed, re.MULTILINE), name
    parsed = parse_response(family.example, fmt=name)
    assert parsed.valid, parsed.error
    assert parsed.fmt == name
    if family.detect is not None:
        assert parse_response(family.example).fmt == name


def always_wait(text, image_size):
    return ParsedAction(thinking=None, action_type="wait", action={"action": "wait"}, valid=True,
                        fmt="test-wait")


WAIT = ModelFamily(name="test-wait", summary="always waits", doc="A family for the test.",
                   parse=always_wait, example="anything")


def test_register_a_family_and_refuse_what_is_undocumented_or_taken():
    register(WAIT)
    try:
        assert parse_response("anything", fmt="test-wait").action_type == "wait"
        assert parse_response("anything").action_type == "unparsed"  # not auto-detected
        with pytest.raises(ValueError, match="already registered"):
            register(WAIT)
    finally:
        FAMILIES.pop("test-wait")
    for missing in ({"doc": None}, {"summary": " "}, {"example": ""}):
        with pytest.raises(ValueError, match="summary, doc and example are required"):
            register(dataclasses.replace(WAIT, **missing))
    with pytest.raises(ValueError, match="reserved"):
        register(dataclasses.replace(WAIT, name="auto"))
    assert "test-wait" not in FAMILIES

