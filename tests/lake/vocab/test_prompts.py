"""Prompts: build_messages checks its arguments and picks the family's layout; the shared
parts."""

from __future__ import annotations

import pytest

from episodelake.lake.vocab.families import prompt_styles
from episodelake.lake.vocab.prompts import STYLES, HistoryStep, build_messages, data_url_part


def test_the_style_type_names_every_family_with_a_layout():
    assert set(STYLES) == set(prompt_styles())


def test_data_url_parts_and_history_from_a_row():
    part = data_url_part(b"\x89PNG")
    assert part["image_url"]["url"] == "data:image/png;base64,iVBORw=="
    step = HistoryStep.from_step(
        {"model_response": "r", "action_type": "click", "action": '{"coordinate": [1, 2]}'}, 7
    )
    assert (step.summary, step.image) == ("click (1, 2)", 7)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"style": "other"}, "style: unknown prompt style"),
        ({"history_length": -1}, "history_length"),
    ],
)
def test_build_messages_bad_arguments(kwargs, error):
    with pytest.raises(ValueError, match=error):
        build_messages("goal", [], **kwargs)
    with pytest.raises(ValueError, match=r"history\[0\]"):
        build_messages("goal", [HistoryStep()])
    with pytest.raises(ValueError, match="goal"):
        build_messages(" ", [])
