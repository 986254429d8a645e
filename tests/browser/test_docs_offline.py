"""/api/docs renders in Chromium with every other origin unreachable, under the server's
Content-Security-Policy, without a single violation, and passes axe-core."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import axe_violations

pytestmark = pytest.mark.browser


def test_api_docs_render_offline(page):
    foreign: list[str] = []
    refused: list[str] = []
    base = page.base

    def route(r):
        if r.request.url.startswith(base):
            r.continue_()
        else:  # offline: nothing outside this server answers
            foreign.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(f"{base}/api/docs")
    page.wait_for_selector(".opblock-tag", timeout=20_000)
    assert page.locator(".opblock").count() > 20  # every route is listed
    assert page.get_by_text("/api/sql", exact=True).count() >= 1
    assert not foreign, f"requests to other sites: {foreign}"
    assert not refused, f"CSP violations: {refused}"


def test_api_docs_pass_axe(page):
    """The docs page passes axe-core like every view of the app, with operations open and in
    "Try it out" (a request body, enum and boolean selects, examples in code blocks)."""
    page.goto(f"{page.base}/api/docs")
    page.wait_for_selector(".opblock-tag", timeout=20_000)
    for operation in ("sql-sql_api_sql_post", "episodes-episodes_api_episodes_get"):
        page.locator(f"#operations-{operation} .opblock-summary").click()
    for _ in range(2):
        page.locator(".opblock.is-open .try-out__btn:not(.cancel)").first.click()
    page.locator("textarea.body-param__text").wait_for()
    page.locator("tr[data-param-name=success] select").wait_for()
    page.locator(".opblock.is-open .responses-wrapper pre.microlight").first.wait_for()
    violations = axe_violations(page)
    assert not violations, json.dumps(violations, indent=1)
    assert page.title() == "EpisodeLake API"
    # the operation's path is text inside its button, and deep links still open it
    assert page.locator(".opblock-summary-control a").count() == 0
    page.goto(f"{page.base}/api/health")
    page.goto(f"{page.base}/api/docs#/sql/sql_api_sql_post")
    page.locator("#operations-sql-sql_api_sql_post.is-open").wait_for()
    assert page.locator(".opblock.is-open").count() == 1
