"""Task suites: what a trainer reads of an environment (tasks, templates, app names)."""

from __future__ import annotations

import pytest

from episodelake.collectors.envs.suites import SUITES, get_suite
from episodelake.lake.storage.errors import InvalidInput


def test_the_sim_suite_lists_its_tasks_templates_and_apps():
    suite = get_suite("sim")
    assert get_suite() is suite and set(SUITES) == {"sim"}
    tasks = suite.tasks()
    assert len(tasks) > 50 and len({t.id for t in tasks}) == len(tasks)
    assert {t.name for t in tasks} == set(suite.templates)
    assert {t.difficulty for t in tasks} <= {"easy", "medium", "hard", "long"}
    assert {t.split for t in tasks if t.difficulty == "long"} == {"train", "held_out"}
    assert {t.split for t in tasks if t.difficulty != "long"} == {None}
    assert "Settings" in suite.apps and len(set(suite.apps)) == len(suite.apps)


def test_an_unknown_suite_is_refused_by_name():
    with pytest.raises(InvalidInput, match="env: no task suite named 'android_world'; suites: sim"):
        get_suite("android_world")
