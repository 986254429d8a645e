"""A chart of a SQL result (issue 24, 3): pick x and y columns and bars or a line; text along
x is drawn as categories, numbers on a scale; the choice is in the address (a link opens the
same chart) and stays when another query runs; a result without numbers says so."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import axe_violations, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
BY_TASK = "select task_name, count(*) as episodes, avg(episode_length) as mean_length from episodes group by 1 order by 1"


def drawn(page) -> dict:
    """What uPlot drew: its x labels and the charted series' values and paths."""
    return page.get_by_test_id("sql-chart").evaluate("""el => ({
      labels: el.xLabels, series: el.plot.series.slice(1).map(s => s.label),
      values: el.plot.data[1], width: el.getBoundingClientRect().width })""")


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["1280x800", "390x844"])
def test_a_result_charted_as_bars_and_a_line(page, size):
    page.set_viewport_size(size)
    page.goto(page.base + "/sql?q=" + quote(BY_TASK))
    page.get_by_test_id("sql-results").locator(".result-body [role=row]").first.wait_for()
    expect(page.get_by_test_id("sql-chart")).to_have_count(0)  # no chart until asked
    page.get_by_test_id("sql-chart-kind").select_option("bar")
    page.wait_for_url(re.compile(r"chart=bar&x=task_name&y=episodes$"))
    chart = page.get_by_test_id("sql-chart")
    chart.locator("canvas").wait_for()
    # y offers only the columns of numbers; x any column
    assert page.get_by_test_id("sql-chart-y").locator("option").all_inner_texts() == ["episodes", "mean_length"]
    assert page.get_by_test_id("sql-chart-x").locator("option").all_inner_texts() == ["task_name", "episodes", "mean_length"]
    d = drawn(page)
    assert d["labels"] == ["send_message", "set_alarm", "wifi_on"] and d["series"] == ["episodes"] and d["values"] == [3, 3, 3], d
    expect(chart).to_have_attribute("aria-label", "episodes by task_name, as bars")
    assert 0 < d["width"] <= size["width"]

    page.get_by_test_id("sql-chart-y").select_option(label="mean_length")
    page.get_by_test_id("sql-chart-kind").select_option("line")
    page.wait_for_url(re.compile(r"chart=line&x=task_name&y=mean_length$"))
    expect(chart).to_have_attribute("aria-label", "mean_length by task_name, as a line")
    assert drawn(page)["values"] == [5, 5, 5]
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
    assert axe_violations(page) == []
    shot(page, f"sql-chart-{size['width']}")


def test_numbers_along_x_a_link_reopens_the_chart_and_text_only_says_so(page):
    page.set_viewport_size(LAPTOP)
    query = "select step, avg(step_reward) as reward from steps group by 1 order by step desc"
    page.goto(page.base + "/sql?q=" + quote(query) + "&chart=line&x=step&y=reward")
    chart = page.get_by_test_id("sql-chart")
    chart.locator("canvas").wait_for()
    d = drawn(page)
    assert d["labels"] == [0, 1, 2, 3, 4, 5], d  # a number scale, sorted, not the result's order
    expect(page.get_by_test_id("sql-chart-kind")).to_have_value("line")

    # running another query keeps the chart asked for; columns it lacks fall back
    box = page.get_by_test_id("sql-input")
    box.fill(BY_TASK)
    box.press("Control+Enter")
    page.wait_for_url(re.compile(r"chart=line&x=step&y=reward$"))
    expect(chart).to_have_attribute("aria-label", "episodes by task_name, as a line")

    page.goto(page.base + "/sql?q=" + quote("select task_name from episodes") + "&chart=bar")
    page.get_by_test_id("sql-results").locator(".result-body [role=row]").first.wait_for()
    expect(page.get_by_text("No column of numbers to chart.")).to_be_visible()
    expect(page.get_by_test_id("sql-chart-kind")).to_be_disabled()
    expect(page.get_by_test_id("sql-chart")).to_have_count(0)
    assert axe_violations(page) == []


def test_negative_values_draw_bars_down_from_the_zero_line(page):
    page.set_viewport_size(LAPTOP)
    query = "select * from (values ('a', -2), ('b', 3)) t(k, v)"
    page.goto(page.base + "/sql?q=" + quote(query) + "&chart=bar&x=k&y=v")
    chart = page.get_by_test_id("sql-chart")
    chart.locator("canvas").wait_for()
    assert drawn(page)["values"] == [-2, 3]
    # the y scale reaches -2, and the canvas under the zero line, halfway to -2 at bar a's
    # middle, is painted in the bar's colour (Tableau blue #4e79a7)
    under = chart.evaluate("""el => {
      const u = el.plot, x = u.valToPos(0, 'x', true);
      const y = (u.valToPos(0, 'y', true) + u.valToPos(-2, 'y', true)) / 2;
      return { min: u.scales.y.min, rgb: Array.from(u.ctx.getImageData(x, y, 1, 1).data.slice(0, 3)) };
    }""")
    assert under["min"] <= -2 and under["rgb"] == [0x4E, 0x79, 0xA7], under
    shot(page, "sql-chart-negative")
