"""Conditions on the screenshot column: Lance cannot filter a blob column inside its scan, so
the `steps` view applies them to the scanned rows (`WHERE image IS NULL` used to fail with
`No match for FieldRef.Name(image)`)."""

from __future__ import annotations

from tests.factories import screenshot


def test_a_condition_on_the_image_column_selects_the_right_rows(lake):
    with lake.writer() as w:
        for step in range(3):
            w.append("steps", {"episode_id": "with", "step": step, "image": screenshot(step), "action_type": "click"})
        w.append("steps", {"episode_id": "without", "step": 0, "action_type": "wait"})
    rows = lambda q: lake.sql(q).to_pylist()  # noqa: E731
    assert rows("select count(*) n from steps where image is null") == [{"n": 1}]
    assert rows("select episode_id, step from steps where image is not null and step > 0 order by step") == [
        {"episode_id": "with", "step": 1}, {"episode_id": "with", "step": 2}]
    sizes = rows("select step, octet_length(image) b from steps where episode_id = 'with' and image is not null "
                 "order by step")
    assert [r["step"] for r in sizes] == [0, 1, 2] and all(r["b"] > 100 for r in sizes)
    # the sandbox (the API's SQL console) answers the same
    from episodelake.lake.storage.sql import SqlEngine

    table, truncated = SqlEngine().run_sandboxed({"steps": lake.dataset("steps")},
                                                 "select count(*) as n from steps where image is null")
    assert table.to_pylist() == [{"n": 1}] and not truncated
