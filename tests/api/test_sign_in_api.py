"""Signing a browser in: the sign-in form comes back to the page that was asked for (only
ever a page of this app), and a wrong token in `/?token=` gets the form with a message, not
raw JSON (programs asking for JSON still get JSON)."""

from __future__ import annotations

import httpx
import pytest

from episodelake.api.settings import Settings
from episodelake.lake.ops import users
from tests.api.webapp_support import ServerThread, build_lake, error_of

HTML = {"Accept": "text/html,application/xhtml+xml"}


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return build_lake(tmp_path_factory.mktemp("sign-in") / "lake")


@pytest.fixture(scope="module")
def token(lake):
    return users.add(lake, "ann", "curator", by="test")[1]


@pytest.fixture(scope="module")
def server(lake, token):
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        yield srv


@pytest.fixture
def browser(server):
    with httpx.Client(base_url=server.url, timeout=30, follow_redirects=False) as c:
        yield c


def test_the_form_returns_to_the_page_asked_for(browser, token):
    page = browser.get("/sets/set-abc?tab=members", headers=HTML)
    assert page.status_code == 401 and 'name="next" value="/sets/set-abc?tab=members"' in page.text
    r = browser.post("/signin", data={"token": token, "next": "/sets/set-abc?tab=members"})
    assert r.status_code == 303 and r.headers["location"] == "/sets/set-abc?tab=members"
    assert "elake_token=" in r.headers["set-cookie"]


def test_a_wrong_token_keeps_the_page_to_return_to(browser):
    r = browser.post("/signin", data={"token": "elk_wrong", "next": "/sql?q=select%201"})
    assert r.status_code == 401 and "That token is not (or no longer) valid." in r.text
    assert 'name="next" value="/sql?q=select%201"' in r.text


@pytest.mark.parametrize("target", ["//evil.example/x", "///evil.example", "https://evil.example/", "/\\evil.example",
                                    "javascript:alert(1)", "/signout", "/signin", "/\u00e9t\u00e9"])
def test_sign_in_never_sends_the_browser_elsewhere(browser, token, target):
    r = browser.post("/signin", data={"token": token, "next": target})
    assert r.status_code == 303 and r.headers["location"] == "/", target


def test_the_page_to_return_to_is_escaped_in_the_form(browser):
    page = browser.get('/sets/x?a="><script>alert(1)</script>', headers=HTML)
    assert page.status_code == 401 and "<script>alert" not in page.text


def test_a_wrong_token_in_the_address_shows_the_sign_in_page(browser, token):
    page = browser.get("/?token=elk_wrong", headers=HTML)
    assert page.status_code == 401 and page.headers["content-type"].startswith("text/html")
    assert "That token is not (or no longer) valid." in page.text and 'action="/signin"' in page.text
    program = browser.get("/?token=elk_wrong")  # not a browser: the API's error shape
    assert program.status_code == 401 and error_of(program)["type"] == "Unauthorized"
    right = browser.get(f"/?token={token}", headers=HTML)
    assert right.status_code == 303 and right.headers["location"] == "/"
