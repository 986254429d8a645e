"""The SQL console in Chromium: the tables and their columns beside the editor (a click
inserts the name), sorting by a header, a step's screenshot in rows that name one, and the
queries run before."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from tests.browser.conftest import axe_violations, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def cells(page, column: int) -> list[str]:
    rows = page.get_by_test_id("sql-results").locator(".result-body [role=row]")
    return [rows.nth(i).locator("[role=cell]").nth(column).inner_text() for i in range(rows.count())]


def test_tables_sorting_screenshots_and_history(page):
    page.goto(page.base + "/sql")
    tables = page.get_by_test_id("sql-tables")
    tables.locator("summary", has_text="audit").wait_for()  # every table, the new ones too
    tables.locator("summary", has_text="users").click()
    assert "token_sha256" not in tables.inner_text() and "role" in tables.inner_text()
    box = page.get_by_test_id("sql-input")
    box.fill("select  from ")
    box.evaluate("b => b.setSelectionRange(7, 7)")
    tables.locator("summary", has_text=re.compile("^episodes$")).click()
    tables.get_by_role("button", name="insert column episodes.task_name").click()
    assert box.input_value() == "select task_name from "
    box.evaluate("b => b.setSelectionRange(b.value.length, b.value.length)")
    tables.get_by_role("button", name="insert table episodes").click()
    assert box.input_value() == "select task_name from episodes"

    query = "select episode_id, step, step_reward from steps where step < 2 order by episode_id desc, step"
    page.goto(page.base + "/sql?q=" + quote(query))
    grid = page.get_by_test_id("sql-results")
    grid.locator(".result-body [role=row]").first.wait_for()
    shots = grid.locator(".shot-cell img")
    assert shots.count() > 0
    first = shots.first
    first.evaluate("img => img.complete || new Promise(r => img.addEventListener('load', r, {once: true}))")
    assert first.evaluate("img => img.naturalWidth") > 0
    ids = cells(page, 1)
    assert ids == sorted(ids, reverse=True)
    grid.get_by_role("button", name=re.compile("^episode_id")).click()
    assert cells(page, 1) == sorted(ids)
    assert grid.locator("[role=columnheader][aria-sort=ascending]").inner_text().startswith("episode_id")
    grid.get_by_role("button", name=re.compile("^step_reward")).click()
    grid.get_by_role("button", name=re.compile("^step_reward")).click()
    rewards = [float(v) for v in cells(page, 3) if v != "NULL"]
    assert rewards == sorted(rewards, reverse=True)
    shot(page, "sql-console")
    assert axe_violations(page) == []

    history = page.get_by_test_id("sql-history")
    history.get_by_role("button", name=re.compile("^select episode_id, step")).wait_for()
    box.fill("")
    history.get_by_role("button", name=re.compile("^select episode_id, step")).click()
    assert box.input_value() == query


def test_a_query_is_saved_for_the_team_and_opened_again(page):
    page.goto(page.base + "/sql")
    box = page.get_by_test_id("sql-input")
    box.fill("select count(*) n from steps")
    page.get_by_label("save the query as").fill("steps in the lake")
    page.get_by_role("button", name="Save as").click()
    saved = page.get_by_test_id("sql-saved")
    saved.get_by_role("button", name="steps in the lake", exact=True).wait_for()
    assert "by —" in saved.inner_text()  # a server without users knows no owner
    box.fill("")
    saved.get_by_role("button", name="steps in the lake", exact=True).click()
    assert box.input_value() == "select count(*) n from steps"
    assert axe_violations(page) == []
    saved.get_by_role("button", name="delete saved query steps in the lake").click()
    saved.get_by_role("button", name="steps in the lake", exact=True).wait_for(state="detached")


def test_names_complete_as_you_type(page):
    page.goto(page.base + "/sql")
    page.get_by_test_id("sql-tables").locator("summary").first.wait_for()  # the names are loaded
    box = page.get_by_test_id("sql-input")
    box.fill("")
    box.press_sequentially("select task_na")
    suggestions = page.get_by_test_id("sql-suggestions")
    suggestions.get_by_role("button", name="task_name").wait_for()
    box.press("Tab")  # takes the first
    assert box.input_value() == "select task_name"
    box.press_sequentially(" from epi")
    suggestions.get_by_role("button", name="episodes", exact=True).click()
    assert box.input_value() == "select task_name from episodes"
    assert suggestions.get_by_role("button").count() == 0
    assert axe_violations(page) == []
