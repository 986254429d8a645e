"""Every view passes axe-core with no serious or critical violation, has its own title, and
opens with a skip link to its content. axe-core is the npm package in web/node_modules (a
dev dependency of the web app), injected into the page; nothing is downloaded."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: url, an element that says the view has loaded, the words its title starts with
VIEWS = [
    ("/", "overview-policies", "Overview"),
    ("/episodes/wifi_on-1/steps/1", "step-panel", "wifi_on"),
    ("/compare/wifi_on-1/wifi_on-0?step=1", "compare-step", "Compare"),
    ("/sets", "sets-page", "Sets"),
    ("/sets/{set_id}", "members", "Set"),
    ("/groups", "groups-page", "Groups"),
    ("/groups/g-wifi_on", "anchor-row", "Group"),
    ("/stats", "success-chart", "Stats"),
    ("/sql?q=select%20task_name%2C%20count(*)%20from%20episodes%20group%20by%201", "sql-results", "SQL"),
    ("/exports", "export-form", "Exports"),
    ("/reruns", "reruns-page", "Re-runs"),
    ("/training", "training-page", "Training"),
    ("/nowhere", "not-found", "Not found"),
]


@pytest.fixture(scope="module")
def set_id(web_server):
    r = httpx.post(web_server.url + "/api/sets", json={"name": "axe", "kind": "failure"})
    sid = r.json()["set_id"]
    httpx.put(f"{web_server.url}/api/sets/{sid}/members/wifi_on-1", json={"failure_category": "grounding"})
    return sid


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)], ids=["1280", "390"])
@pytest.mark.parametrize("url, ready, title", VIEWS, ids=[v[0].split("?")[0] for v in VIEWS])
def test_every_view_passes_axe(page, set_id, url, ready, title, width, height):
    page.set_viewport_size({"width": width, "height": height})
    page.goto(page.base + url.format(set_id=set_id))
    page.get_by_test_id(ready).first.wait_for()
    page.wait_for_load_state("networkidle")
    violations = axe_violations(page)
    assert not violations, json.dumps(violations, indent=1)
    assert re.match(re.escape(title), page.title()) and page.title().endswith("EpisodeLake"), page.title()


def test_titles_differ_and_the_skip_link_comes_first(page):
    titles = set()
    for url, ready, _ in VIEWS[:4]:
        page.goto(page.base + url.format(set_id="x"))
        page.get_by_test_id(ready).first.wait_for()
        titles.add(page.title())
    assert len(titles) == 4, titles
    page.goto(page.base + "/episodes/wifi_on-1/steps/1")
    page.get_by_test_id("step-panel").wait_for()
    page.keyboard.press("Tab")
    skip = page.evaluate("document.activeElement.textContent")
    assert skip == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "content"
    page.keyboard.press("d")  # the replay's keys work from there
    page.wait_for_selector('[data-testid=screen][data-loaded-step="2"]')


def test_form_controls_have_labels_beyond_placeholders(page):
    page.goto(page.base + "/episodes/wifi_on-1/steps/1")
    page.get_by_test_id("step-panel").wait_for()
    page.get_by_role("button", name="more filters").click()
    unlabeled = page.evaluate("""() => [...document.querySelectorAll('input, textarea, select')]
        .filter(el => el.type !== 'hidden' && !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                      && !el.getAttribute('aria-labelledby'))
        .map(el => el.outerHTML.slice(0, 80))""")
    assert unlabeled == []
    page.goto(page.base + "/sql")
    expect(page.get_by_label("SQL query")).to_have_count(1)  # the SQL view loads as its own chunk


def test_search_saved_views_queue_and_keys_list_pass_axe(page):
    """The controls that open on demand: search results, the save-view form, the keys list."""
    page.goto(page.base + "/episodes/wifi_on-1/steps/1?success=false")
    page.get_by_test_id("queue-position").get_by_text("of").wait_for()
    page.keyboard.press("/")
    page.keyboard.type("wifi")
    page.locator("[role=option][data-episode]").first.wait_for()
    opened = [axe_violations(page)]
    page.keyboard.press("Escape")
    page.get_by_role("button", name="save view…").click()
    page.get_by_label("view name").wait_for()
    opened.append(axe_violations(page))
    page.keyboard.press("Escape")
    page.keyboard.press("?")
    page.get_by_test_id("keys-help").wait_for()
    opened.append(axe_violations(page))
    assert opened == [[], [], []], json.dumps(opened, indent=1)
