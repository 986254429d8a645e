"""Checkpoint folders and the `latest` pointer; the training / held-out split of the tasks."""

from __future__ import annotations

import pytest

from episodelake.collectors.envs.sim import tasks as sim_tasks
from episodelake.lake.storage.errors import NotFound
from episodelake.trainer import checkpoint
from episodelake.trainer.config import ConfigError, TrainConfig
from episodelake.trainer.loop import sample_tasks, split_tasks


def test_latest_moves_only_when_a_checkpoint_is_committed(tmp_path):
    assert checkpoint.latest(tmp_path) is None
    first = checkpoint.iteration_folder(tmp_path, 0)
    first.mkdir()
    checkpoint.commit(tmp_path, first, {"iteration": 0})
    partial = checkpoint.iteration_folder(tmp_path, 1)
    partial.mkdir()  # a save interrupted before its commit
    assert checkpoint.latest(tmp_path) == first
    checkpoint.commit(tmp_path, partial, {"iteration": 1})
    assert checkpoint.latest(tmp_path) == partial
    assert checkpoint.read_state(partial) == {"iteration": 1}
    assert not first.exists()  # older checkpoints are removed after the commit
    (tmp_path / checkpoint.LATEST).write_text("iter-000009")
    with pytest.raises(NotFound, match="iter-000009"):
        checkpoint.latest(tmp_path)


def test_held_out_tasks_are_unseen_values_of_trained_templates():
    config = TrainConfig()
    train, held_out = split_tasks(config)
    assert set(train).isdisjoint(held_out) and held_out
    easy = [t for t in sim_tasks.all_tasks() if t.difficulty == "easy"]
    assert sorted(train + held_out) == sorted(t.id for t in easy)
    trained_templates = {sim_tasks.get_task(t).name for t in train}
    assert {sim_tasks.get_task(t).name for t in held_out} <= trained_templates
    assert split_tasks(TrainConfig(advantages={"algo": "grpo"})) == (train, held_out)  # same seed, same split
    assert split_tasks(TrainConfig(seed=1)) != (train, held_out)


def test_task_samples_depend_on_seed_and_iteration_only():
    config = TrainConfig(tasks=20)
    train, _ = split_tasks(config)
    first = sample_tasks(train, config, 3)
    assert len(first) == 20 and set(first) <= set(train)
    assert len(set(first[:len(train)])) == len(train)  # distinct while there are enough
    assert sample_tasks(train, config, 3) == first != sample_tasks(train, config, 4)


def test_templates_choose_the_task_set_of_any_difficulty():
    config = TrainConfig(templates="notes_create, dial_number,notes_create")
    assert config.templates == "notes_create,dial_number"
    train, held_out = split_tasks(config)
    names = {sim_tasks.get_task(t).name for t in train + held_out}
    assert names == {"notes_create", "dial_number"}  # medium templates, though --difficulty is easy
    assert {sim_tasks.get_task(t).name for t in held_out} == names  # unseen values of each
    registered = [t.id for t in sim_tasks.all_tasks() if t.name in names]
    assert sorted(train + held_out) == sorted(registered)


def test_an_unknown_template_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"templates: note_create is not a sim task template; "
                                          r"templates: .*notes_create"):
        TrainConfig(templates="note_create,dial_number")
    with pytest.raises(ConfigError, match="templates: ' , '"):
        TrainConfig(templates=" , ")
