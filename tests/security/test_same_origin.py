"""Writes signed in by cookie come from the app's own pages only.

A page on another port of 127.0.0.1 is the same *site* as the server, so a SameSite=Strict
cookie rides along with its requests: the server checks `Origin` (else `Referer`) on every
write. The test walks the OpenAPI document, so a route added later cannot forget, and signs
out with a POST only.
"""

from __future__ import annotations

import re

import httpx
import pytest

from episodelake.api.security import APP_HEADER, COOKIE, origin_of
from episodelake.api.settings import Settings
from episodelake.lake.ops import users
from tests.api.webapp_support import ServerThread, build_lake, error_of

WRITES = ("post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return build_lake(tmp_path_factory.mktemp("origin") / "lake")


@pytest.fixture(scope="module")
def token(lake):
    return users.add(lake, "alice", "admin", by="test")[1]


@pytest.fixture(scope="module")
def server(lake, token):
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        yield srv


@pytest.fixture
def alice(server, token):
    """A client signed in the way a browser is: by the cookie, not a bearer header."""
    with httpx.Client(base_url=server.url, timeout=30, cookies={COOKIE: token}, follow_redirects=False) as c:
        yield c


def write_routes(server, token) -> list[tuple[str, str]]:
    spec = httpx.get(f"{server.url}/openapi.json", headers={"Authorization": f"Bearer {token}"}).json()
    routes = [(method.upper(), re.sub(r"\{[^}]+\}", "x", path))
              for path, item in spec["paths"].items() for method in item if method in WRITES]
    assert len(routes) >= 25, routes  # the document lists the API's writes
    return routes


def foreign_port(server) -> int:
    return int(server.url.rsplit(":", 1)[1]) + 1


def test_origin_of_normalises_what_browsers_send():
    assert origin_of("http://127.0.0.1:8799/sets?x=1") == "http://127.0.0.1:8799"
    assert origin_of("HTTP://LocalHost:80") == "http://localhost"
    assert origin_of("https://[::1]:443/") == "https://[::1]"
    for bad in ("null", "", "file:///etc", "http://", "http://a:99999"):
        assert origin_of(bad) is None


@pytest.mark.parametrize("how", ["origin", "referer", "null-origin", "neither"])
def test_every_write_route_refuses_a_foreign_page(server, token, lake, alice, how):
    other = f"http://127.0.0.1:{foreign_port(server)}"
    headers = {"origin": {"Origin": other}, "referer": {"Referer": other + "/attack.html"},
               "null-origin": {"Origin": "null"}, "neither": {}}[how]
    versions = lake.current_versions()
    for method, path in write_routes(server, token):
        r = alice.request(method, path, headers=headers, json={})
        assert r.status_code == 403 and error_of(r)["type"] == "CrossOrigin", (method, path, r.text)
        message = error_of(r)["message"]
        assert f"{method} {path}" in message and "\n" not in message
        assert (other in message) if how in ("origin", "referer") else True
    lake.invalidate()
    assert lake.current_versions() == versions


def test_the_apps_own_pages_and_scripts_may_write(server, token, lake, alice):
    created = alice.post("/api/sets", json={"name": "ours", "kind": "failure"}, headers={"Origin": server.url})
    assert created.status_code == 201, created.text
    set_id = created.json()["set_id"]
    r = alice.patch(f"/api/sets/{set_id}", json={"description": "from the app"},
                    headers={"Referer": server.url + "/sets"})
    assert r.status_code == 200, r.text
    r = alice.patch(f"/api/sets/{set_id}", json={"description": "from the app's client"},
                    headers={APP_HEADER.decode(): "1"})
    assert r.status_code == 200, r.text
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as script:
        assert script.patch(f"/api/sets/{set_id}", json={"description": "by a script"}).status_code == 200
    lake.invalidate()
    assert lake.sql(f"select description from sets where set_id = '{set_id}'").to_pylist() == [
        {"description": "by a script"}]


def test_sign_out_is_a_post_from_the_app(server, alice):
    page = alice.get("/signout")  # an <img src=/signout> elsewhere: nobody is signed out
    assert page.status_code == 405 and page.headers["allow"] == "POST"
    assert '<form method="post" action="/signout">' in page.text and "set-cookie" not in page.headers
    other = f"http://127.0.0.1:{foreign_port(server)}"
    refused = alice.post("/signout", headers={"Origin": other})
    assert refused.status_code == 403 and "set-cookie" not in refused.headers
    assert alice.get("/api/me").json()["name"] == "alice"  # still signed in
    done = alice.post("/signout", headers={"Origin": server.url})
    assert done.status_code == 303 and "Max-Age=0" in done.headers["set-cookie"]


def test_sign_in_from_another_page_is_refused(server, token):
    with httpx.Client(base_url=server.url, follow_redirects=False) as c:
        other = f"http://127.0.0.1:{foreign_port(server)}"
        r = c.post("/signin", data={"token": token}, headers={"Origin": other})
        assert r.status_code == 403 and "set-cookie" not in r.headers
        r = c.post("/signin", data={"token": token}, headers={"Origin": server.url})
        assert r.status_code == 303 and f"{COOKIE}=" in r.headers["set-cookie"]


def test_responses_keep_the_referrer_on_this_origin(server, alice):
    assert alice.get("/api/health").headers["referrer-policy"] == "same-origin"
