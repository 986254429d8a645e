"""The long templates (difficulty ``long``): the oracle completes each in its stated number of
steps, screens recur inside an episode, and the held-out split uses values no training task
has."""

from __future__ import annotations

import pytest

from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.tasks import TEMPLATES, all_tasks, get_task
from episodelake.collectors.envs.sim.tasks import long as long_tasks
from episodelake.collectors.envs.sim.tasks.base import Template
from episodelake.lake.storage.errors import InvalidInput

LONG = [t for t in all_tasks() if t.difficulty == "long"]


def test_every_long_template_states_its_length_and_has_both_splits():
    names = {t.name for t in LONG}
    assert names == set(long_tasks.STEPS) == {t.name for t in long_tasks.TEMPLATES}
    for name in names:
        splits = [t.split for t in LONG if t.name == name]
        assert splits.count("held_out") >= 6 and splits.count("train") >= 12, name
        low, high = long_tasks.STEPS[name]
        assert 8 <= low <= high <= 20, name
        assert TEMPLATES[name].difficulty == "long"


@pytest.mark.parametrize("name", sorted(long_tasks.STEPS))
def test_the_oracle_completes_each_template_in_its_stated_steps(oracle_runs, name):
    runs = [run for run in oracle_runs if run.task.name == name]
    assert runs and all(run.success for run in runs)
    low, high = long_tasks.STEPS[name]
    lengths = {len(run.actions) for run in runs}
    assert min(lengths) == low and max(lengths) == high, lengths


@pytest.mark.parametrize("name", sorted(long_tasks.STEPS))
def test_screens_recur_inside_an_episode(oracle_runs, name):
    """What GiGPO's step groups need: the same screen state met more than once per episode."""
    run = next(run for run in oracle_runs if run.task.name == name)
    ids = [screen.key for screen in run.screens]
    assert len(set(ids)) < len(ids)


def test_held_out_values_never_appear_in_training_tasks():
    for name in long_tasks.STEPS:
        train = {v for t in LONG if t.name == name and t.split == "train" for v in dict(t.params).values()}
        held = {v for t in LONG if t.name == name and t.split == "held_out" for v in dict(t.params).values()}
        assert held and not held & train, name


def test_sub_goals_are_done_in_order_and_never_undone():
    task = get_task("favourite_contacts[first=Aaron Brooks,second=Alice Chen,third=Anna Lee]")
    phone = Phone(0)
    task.setup(phone)
    favourites = []
    for _ in range(20):
        if phone.step(task.solution(phone)).done:
            break
        now = [c.name for c in phone.state.contacts if c.favorite]
        assert now[:len(favourites)] == favourites or set(favourites) <= set(now)
        favourites = now
    assert favourites == ["Aaron Brooks", "Alice Chen", "Anna Lee"]
    assert not next(c for c in phone.state.contacts if c.name == "Anna Li").favorite


def test_the_settings_tour_starts_with_its_switches_off():
    task = get_task("settings_tour[first=NFC,second=Do Not Disturb,third=mobile data]")
    phone = Phone(0)
    task.setup(phone)
    assert not (phone.state.settings.nfc or phone.state.settings.dnd or phone.state.settings.mobile_data)
    assert task.split == "held_out" and not task.check(phone)


def test_a_held_out_entry_outside_the_grid_is_refused():
    with pytest.raises(InvalidInput, match="held_out entry"):
        Template("x_long", "Do {a}.", "long", lambda *_: False, lambda *_: None, ({"a": "1"},),
                 held_out=({"a": "2"},))
