"""The derived-column registry: every derivation is documented and fills its declared columns
from a screenshot; a derivation without help, with a taken name or with columns the steps
table lacks is refused."""

from __future__ import annotations

import dataclasses
import re

import pytest

from episodelake.lake.derive import derivations as derived
from episodelake.lake.derive.derivations import DERIVATIONS, derive, register
from episodelake.lake.storage import schema
from tests.factories import text_screen


@pytest.mark.parametrize("name", list(DERIVATIONS))
def test_each_derivation_is_documented_and_fills_its_columns(name):
    d = DERIVATIONS[name]
    assert d.help.strip()
    assert re.search(rf"^- ``{re.escape(name)}``: ", derived.__doc__, re.MULTILINE), name
    values = derive(name, text_screen("Settings", "Wi-Fi"))
    assert "image_error" not in values
    assert set(values) == set(d.columns[:1] if d.per_step else d.columns) | (
        {d.version_column} if d.version_column else set())
    if d.per_step:  # the per-step columns come from the step's stored `reads`
        stored = {column: None for column in d.reads}
        assert set(d.per_step(values, stored)) == set(d.columns)
    assert set(d.written()) <= set(schema.STEPS.names)


def test_register_refuses_what_is_undocumented_taken_or_undeclared():
    thumbs = DERIVATIONS["thumbs"]
    with pytest.raises(ValueError, match="already registered"):
        register(thumbs)
    with pytest.raises(ValueError, match="help is required"):
        register(dataclasses.replace(thumbs, name="thumbs2", help=" "))
    with pytest.raises(ValueError, match=r"no column\(s\) \['sparkle'\]; declare them"):
        register(dataclasses.replace(thumbs, name="thumbs2", columns=("sparkle",)))
    assert "thumbs2" not in DERIVATIONS


def test_coverage_counts_what_a_derivation_has_done_and_has_left(tmp_path):
    from episodelake.collectors.record.recorder import Recorder
    from episodelake.lake import Lake
    from episodelake.lake.derive.derivations import Scope, coverage, derivations, fill
    from tests.factories import response, screenshot

    lake = Lake(tmp_path / "lake")
    with Recorder(lake, anchor=None) as rec, rec.start_episode("t", "goal", episode_id="e-1") as ep:
        for k in range(3):
            ep.log_step(screenshot(k), response("click"))
        ep.finish(success=True)
    lake.invalidate()
    assert coverage(lake, "thumbs") == {"screenshots": 3, "done": 0, "pending": 3}
    fill(lake, derivations(["thumbs"]), Scope())
    lake.invalidate()
    assert coverage(lake, "thumbs") == {"screenshots": 3, "done": 3, "pending": 0}
    with pytest.raises(ValueError, match="unknown derivation"):
        coverage(lake, "sparkle")
