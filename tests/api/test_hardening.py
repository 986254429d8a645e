"""The SQL console keeps nothing and answers within a byte cap; every response forbids
framing and third-party content; odd paths and IPv6 loopback behave; /api/docs works offline.
All against a real server on loopback."""

from __future__ import annotations

import re
import socket
from html.parser import HTMLParser

import httpx
import pytest

from episodelake.api.cli.serve import url_of
from episodelake.api.security import CONTENT_SECURITY_POLICY
from episodelake.api.settings import Settings
from tests.api.test_security import raw_get
from tests.api.webapp_support import ServerThread, error_of
from tests.lake.storage.test_sql_sandbox import WRAPPED

FINGERPRINT = """
    SELECT upper('x') AS upper, lower('X') AS lower,
           (SELECT count(*) FROM duckdb_tables()) AS tables,
           (SELECT count(*) FROM duckdb_views() WHERE NOT internal AND NOT temporary) AS views,
           (SELECT count(*) FROM duckdb_sequences()) AS sequences,
           (SELECT count(*) FROM duckdb_schemas() WHERE NOT internal) AS schemas,
           (SELECT count(*) FROM duckdb_functions() WHERE function_type = 'macro' AND NOT internal) AS macros,
           (SELECT count(*) FROM episodes) AS episodes"""


def fingerprint(client) -> list:
    r = client.post("/api/sql", json={"query": FINGERPRINT})
    assert r.status_code == 200, r.text
    return r.json()["rows"][0]


def where_ids(client, where: str) -> list[str]:
    r = client.get("/api/episodes", params={"where": where, "limit": 100})
    assert r.status_code == 200, r.text
    return sorted(e["episode_id"] for e in r.json()["items"])


# -- item: nothing a query does outlives it ------------------------------------------------
def test_no_statement_kind_changes_the_sandbox_over_http(client):
    before = fingerprint(client)
    assert before[:2] == ["X", "x"] and before[-1] == 9
    wifi = where_ids(client, "upper(task_name) = 'WIFI_ON'")
    assert wifi == ["wifi_on-0", "wifi_on-1", "wifi_on-2"]
    let_through = []
    for query in WRAPPED:
        r = client.post("/api/sql", json={"query": query})
        if r.status_code != 400 or error_of(r)["type"] != "SqlRefused":
            let_through.append((query, r.status_code))
        # the same statements as `where` filters (closing the fragment's parenthesis)
        client.get("/api/episodes", params={"where": f"true) UNION ALL ({query}"})
    assert not let_through
    assert fingerprint(client) == before
    assert where_ids(client, "upper(task_name) = 'WIFI_ON'") == wifi
    assert where_ids(client, "lower(task_name) = 'wifi_on'") == wifi


def test_explain_analyze_of_a_select_works_over_http(client):
    r = client.post("/api/sql", json={"query": "EXPLAIN ANALYZE SELECT count(*) FROM episodes"})
    assert r.status_code == 200 and r.json()["rows"]


def test_configuration_is_refused_over_http(client):
    for query in ("select current_setting('secret_directory')", "select * from duckdb_settings()",
                  "select name, setting from pg_settings"):
        r = client.post("/api/sql", json={"query": query})
        assert r.status_code == 400 and "configuration" in error_of(r)["message"], query


# -- item: responses capped in bytes -------------------------------------------------------
@pytest.fixture(scope="module")
def small_server(lake):
    with ServerThread(Settings(lake=lake.path, static_dir=None, sql_max_bytes=200_000), lake) as srv:
        yield srv


@pytest.mark.parametrize("query", [
    "select repeat('x', 10000) a, repeat('y', 10000) b from range(10000)",
    "select repeat('\"', 3000) a from range(10000)",  # each quote doubles in JSON
    "select range, range * 1.5 f, range::varchar s from range(100000)",  # JSON numbers outgrow Arrow
])
def test_sql_response_stays_under_the_byte_cap(small_server, query):
    r = httpx.post(f"{small_server.url}/api/sql", json={"query": query}, timeout=60)
    body = r.json()
    assert r.status_code == 200 and len(r.content) <= 200_000
    assert body["truncated"] is True and body["truncated_by"] == "bytes" and body["rows"]


def test_sql_row_cap_says_rows(small_server):
    r = httpx.post(f"{small_server.url}/api/sql", json={"query": "select * from range(20000)"})
    assert r.json()["truncated_by"] == "rows" and len(r.json()["rows"]) == 10_000
    r = httpx.post(f"{small_server.url}/api/sql", json={"query": "select 1"})
    assert r.json()["truncated"] is False and r.json()["truncated_by"] is None


# -- item: odd paths, IPv6 loopback, headers, offline docs ---------------------------------
@pytest.fixture(scope="module")
def static_server(lake, tmp_path_factory):
    root = tmp_path_factory.mktemp("static")
    (root / "assets").mkdir()
    (root / "index.html").write_text("<!doctype html><div id=root></div>")
    (root / "assets" / "app.js").write_text("console.log(1)")
    with ServerThread(Settings(lake=lake.path, static_dir=root), lake) as srv:
        yield srv


@pytest.mark.parametrize("path", ["/%00", "/x%00y", "/episodes/%00/steps/1", "/api/%00", "/assets/%00",
                                  "/assets/app.js%00", "/api/docs/vendor/%00"])
@pytest.mark.parametrize("which", ["static_server", "server"])
def test_unnameable_paths_are_404_in_the_error_shape(request, which, path):
    srv = request.getfixturevalue(which)
    status, body = raw_get(srv.host, srv.port, path)
    assert status in (400, 404), (path, status, body[:200])
    assert b'"error"' in body, body[:200]


def test_a_name_too_long_for_the_filesystem_is_404(static_server):
    status, body = raw_get(static_server.host, static_server.port, "/" + "a" * 5000)
    assert status == 404 and b'"NotFound"' in body


def test_every_response_forbids_framing_and_foreign_content(static_server):
    csp = CONTENT_SECURITY_POLICY
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert not re.search(r"https?:|\*", csp), "no third-party origin and no wildcard"
    with httpx.Client(base_url=static_server.url) as c:
        responses = [c.get("/"), c.get("/episodes/x"), c.get("/assets/app.js"), c.get("/assets/nope.js"),
                     c.get("/api/health"), c.get("/api/nope"), c.get("/openapi.json"), c.get("/api/docs"),
                     c.get("/api/docs/vendor/swagger-ui.css"), c.post("/api/sql", json={"query": "drop table x"}),
                     c.post("/api/sql", content=b"x" * (2 << 20), headers={"Content-Type": "application/json"}),
                     c.get("/api/health", headers={"Host": "evil.example"})]
    assert [r.status_code for r in responses] == [200, 200, 200, 404, 200, 404, 200, 200, 200, 400, 413, 400]
    for r in responses:
        assert r.headers["content-security-policy"] == csp, r.url
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"


def test_token_refusals_carry_the_headers_too(lake):
    settings = Settings(lake=lake.path, host="127.0.0.2", token="s3cret-token-0123456789", static_dir=None)
    with ServerThread(settings, lake) as srv:
        r = httpx.get(f"{srv.url}/api/health")
        assert r.status_code == 401 and r.headers["x-frame-options"] == "DENY"


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.inline_scripts = 0
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.refs += [v for k, v in attrs.items() if k in ("src", "href") and v]
        self._in_script = tag == "script" and not attrs.get("src")

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline_scripts += 1

    def handle_endtag(self, tag):
        self._in_script = False


def test_api_docs_load_nothing_from_other_sites(static_server):
    with httpx.Client(base_url=static_server.url) as c:
        page = c.get("/api/docs")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        refs = _Refs()
        refs.feed(page.text)
        assert refs.inline_scripts == 0, "the CSP forbids inline scripts"
        assert len(refs.refs) >= 4
        for ref in refs.refs:
            assert ref.startswith("/") and not ref.startswith("//"), ref
            asset = c.get(ref)
            assert asset.status_code == 200 and len(asset.content) > 0, ref
        init = c.get("/api/docs/swagger-init.js").text
        assert '"/openapi.json"' in init and "validatorUrl: null" in init
        assert c.get("/openapi.json").json()["openapi"].startswith("3.")


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
def test_ipv6_loopback_accepts_its_own_host_names(lake):
    with ServerThread(Settings(lake=lake.path, host="::1", static_dir=None), lake) as srv:
        assert srv.url == f"http://[::1]:{srv.port}"
        assert httpx.get(f"{srv.url}/api/health").status_code == 200
        for host in (f"[::1]:{srv.port}", "[::1]", "localhost", f"127.0.0.1:{srv.port}"):
            with socket.create_connection(("::1", srv.port), timeout=10) as sock:
                sock.sendall(f"GET /api/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
                assert sock.recv(100).split()[1] == b"200", host
        r = httpx.get(f"{srv.url}/api/health", headers={"Host": "rebind.evil.example"})
        assert r.status_code == 400 and error_of(r)["type"] == "BadHost"


def test_serve_prints_a_url_that_works_for_ipv6():
    assert url_of("::1", 8799) == "http://[::1]:8799/"
    assert url_of("127.0.0.1", 8799) == "http://127.0.0.1:8799/"
