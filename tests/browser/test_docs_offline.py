"""/api/docs renders in Chromium with every other origin unreachable, under the server's
Content-Security-Policy, without a single violation."""

from __future__ import annotations

import pytest

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
