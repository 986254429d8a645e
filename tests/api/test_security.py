"""Security over a real server: path traversal, SQL that writes or reads files, the token on
a non-loopback bind, oversized bodies, closed CORS and Host checks."""

from __future__ import annotations

import socket

import httpx
import pytest

from episodelake.api.settings import Settings
from episodelake.lake.storage.errors import InvalidInput
from tests.api.webapp_support import ServerThread, error_of

TOKEN = "s3cret-token-0123456789"


def raw_get(host: str, port: int, path: str, headers: str = "") -> tuple[int, bytes]:
    """A GET with the path sent byte for byte (clients normalise `..` away)."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{headers}Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.fixture(scope="module")
def static_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("static")
    (root / "assets").mkdir()
    (root / "index.html").write_text("<!doctype html><div id=root></div>")
    (root / "assets" / "app.js").write_text("console.log(1)")
    (root.parent / "secret.txt").write_text("TOP SECRET")
    return root


@pytest.fixture(scope="module")
def web_server(lake, static_dir):
    with ServerThread(Settings(lake=lake.path, static_dir=static_dir), lake) as srv:
        yield srv


@pytest.mark.parametrize("path", [
    "/api/episodes/../../../../etc/passwd",
    "/api/episodes/..%2F..%2F..%2Fetc%2Fpasswd",
    "/api/episodes/%2e%2e/steps/0/image",
    "/api/episodes/..%5C..%5Cetc/steps/0/image",
    "/api/episodes/wifi_on-0%00/steps/0/image",
    "/api/episodes/'%20OR%20'1'='1",
    "/api/sets/..%2F..%2Fsecret/members",
    "/api/groups/..",
    "/..%2Fsecret.txt",
    "/../secret.txt",
    "/assets/..%2F..%2Fsecret.txt",
    "/assets/../../secret.txt",
    "/%2e%2e/%2e%2e/etc/passwd",
])
def test_path_traversal_never_reaches_a_file(web_server, path):
    status, body = raw_get(web_server.host, web_server.port, path)
    assert b"TOP SECRET" not in body and b"root:" not in body
    assert status in (200, 400, 404, 422), (path, status)
    if status == 200:  # only the SPA's index.html is ever served for unknown paths
        assert body.startswith(b"<!doctype html>")


def test_spa_fallback_serves_index_for_view_urls(web_server):
    with httpx.Client(base_url=web_server.url) as c:
        for url in ("/", "/episodes/wifi_on-0/steps/2", "/sets", "/compare/a/b?step=1", "/sql"):
            r = c.get(url)
            assert r.status_code == 200 and r.text.startswith("<!doctype html>"), url
        assert c.get("/assets/app.js").text == "console.log(1)"
        assert c.get("/assets/nope.js").status_code == 404
        r = c.get("/api/nope")
        assert r.status_code == 404 and r.json()["error"]["type"] == "NotFound"


def test_unbuilt_web_app_says_how_to_build_it(client):
    r = client.get("/episodes/x")
    assert r.status_code == 503 and "just web" in error_of(r)["message"]


@pytest.mark.parametrize("query, words", [
    ("COPY (SELECT 1) TO '/tmp/elake-sql-test.csv'", "COPY"),
    ("SELECT * FROM read_csv('/etc/passwd')", "file"),
    ("SELECT * FROM read_text('/etc/passwd')", "file"),
    ("SELECT * FROM '/etc/passwd'", ""),
    ("ATTACH '/tmp/elake-x.db' AS x", "ATTACH"),
    ("INSTALL httpfs", "INSTALL"),
    ("SET enable_external_access = true", "SET"),
    ("CREATE TABLE t AS SELECT 1", "CREATE"),
    ("DELETE FROM episodes", "DELETE"),
    ("SELECT 1; SELECT 2", "one statement"),
    ("PRAGMA database_list", "PRAGMA"),
])
def test_sql_cannot_write_or_read_files(client, query, words):
    r = client.post("/api/sql", json={"query": query})
    assert r.status_code == 400, (query, r.text)
    err = error_of(r)
    assert err["type"] == "SqlRefused" and words.lower() in err["message"].lower()
    import os

    assert not os.path.exists("/tmp/elake-sql-test.csv") and not os.path.exists("/tmp/elake-x.db")


def test_sql_reads_the_lake(client):
    r = client.post("/api/sql", json={"query": "select task_name, count(*) n, 1 n from episodes group by 1 order by 1"})
    body = r.json()
    assert [c["name"] for c in body["columns"]] == ["task_name", "n", "n"]
    assert body["rows"][0] == ["send_message", 3, 1] and body["truncated"] is False
    r = client.post("/api/sql", json={"query": "select image from steps limit 1"})
    assert r.json()["rows"][0][0].startswith("<") and "bytes>" in r.json()["rows"][0][0]


# -- a non-loopback bind: token required ---------------------------------------------------
def test_settings_refuse_shared_binds_without_a_token(tmp_path):
    for host in ("0.0.0.0", "127.0.0.2", "192.168.1.5"):
        with pytest.raises(InvalidInput, match="ELAKE_TOKEN"):
            Settings(lake=tmp_path, host=host)
    with pytest.raises(ValueError, match="token"):
        Settings(lake=tmp_path, host="0.0.0.0", token="short")
    assert Settings(lake=tmp_path).host == "127.0.0.1" and Settings(lake=tmp_path).port == 8799


@pytest.fixture(scope="module")
def shared_server(lake):
    settings = Settings(lake=lake.path, host="127.0.0.2", token=TOKEN, static_dir=None,
                        max_body_bytes=4096, sql_max_rows=5, sql_timeout_s=0.5)
    with ServerThread(settings, lake) as srv:
        yield srv


@pytest.mark.parametrize("path", ["/api/health", "/api/episodes", "/openapi.json", "/api/docs",
                                  "/", "/episodes/x", "/api/episodes/wifi_on-0/steps/0/image"])
def test_every_request_needs_the_token(shared_server, path):
    with httpx.Client(base_url=shared_server.url) as c:
        r = c.get(path)
        assert r.status_code == 401 and error_of(r)["type"] == "Unauthorized", path
        r = c.get(path, headers={"Authorization": "Bearer wrong-token-0123456789"})
        assert r.status_code == 401 and "wrong" in error_of(r)["message"]
        r = c.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code != 401, path


def test_writes_without_the_token_change_nothing(shared_server, lake):
    before = lake.sql("select count(*) from sets").column(0)[0].as_py()
    r = httpx.post(f"{shared_server.url}/api/sets", json={"name": "sneaky"})
    assert r.status_code == 401
    lake.invalidate()
    assert lake.sql("select count(*) from sets").column(0)[0].as_py() == before


def test_query_token_sets_a_cookie_for_the_browser_at_the_root_only(shared_server):
    with httpx.Client(base_url=shared_server.url) as c:
        refused = c.get("/api/health", params={"token": TOKEN})
        assert refused.status_code == 401 and "URL" in error_of(refused)["message"]
        r = c.get("/", params={"token": TOKEN})
        assert r.status_code == 303 and r.headers["location"] == "/"  # the token leaves the address bar
        cookie = r.headers["set-cookie"]
        assert "elake_token=" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert c.get("/api/health").status_code == 200  # the cookie now carries the token
        assert c.get("/api/me").json() == {"name": "server", "role": "admin", "sign_in": True}
    assert httpx.get(f"{shared_server.url}/", params={"token": "wrong-token-0123456789"}).status_code == 401


def auth() -> dict:
    return {"Authorization": f"Bearer {TOKEN}"}


def test_oversized_bodies_are_refused(shared_server):
    big = {"query": "select 1 -- " + "x" * 10_000}
    r = httpx.post(f"{shared_server.url}/api/sql", json=big, headers=auth())
    assert r.status_code == 413 and error_of(r)["type"] == "PayloadTooLarge"

    def chunks():
        for _ in range(10):
            yield b"x" * 1000

    r = httpx.post(f"{shared_server.url}/api/sql", content=chunks(),
                   headers={**auth(), "Content-Type": "application/json"})
    assert r.status_code == 413 and "4096 bytes" in error_of(r)["message"]
    ok = httpx.post(f"{shared_server.url}/api/sql", json={"query": "select 1"}, headers=auth())
    assert ok.status_code == 200


def test_sql_row_cap_and_time_limit(shared_server):
    r = httpx.post(f"{shared_server.url}/api/sql", json={"query": "select * from range(100)"}, headers=auth())
    assert len(r.json()["rows"]) == 5 and r.json()["truncated"] is True
    r = httpx.post(f"{shared_server.url}/api/sql", timeout=30, headers=auth(),
                   json={"query": "select count(*) from range(100000000000) a"})
    assert r.status_code == 400 and "time limit" in error_of(r)["message"]


# -- loopback: closed CORS, trusted Host names ---------------------------------------------
def test_cors_is_closed_by_default(client):
    r = client.get("/api/health", headers={"Origin": "http://evil.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    r = client.options("/api/sets", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in r.headers


def test_cors_opens_only_to_configured_origins(lake):
    settings = Settings(lake=lake.path, static_dir=None, cors_origins=("http://localhost:5173",))
    with ServerThread(settings, lake) as srv:
        r = httpx.get(f"{srv.url}/api/health", headers={"Origin": "http://localhost:5173"})
        assert r.headers["access-control-allow-origin"] == "http://localhost:5173"
        r = httpx.get(f"{srv.url}/api/health", headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in r.headers


def test_foreign_host_names_are_refused_on_loopback(server):
    """A page on another site that rebinds its DNS name to 127.0.0.1 still sends its own Host."""
    assert raw_get(server.host, server.port, "/api/health")[0] == 200
    with socket.create_connection((server.host, server.port)) as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: rebind.evil.example\r\nConnection: close\r\n\r\n")
        assert sock.recv(100).split()[1] == b"400"


def test_json_body_needs_a_json_content_type(client):
    """A cross-site form post (text/plain, no preflight) cannot create a set."""
    r = client.post("/api/sets", content=b'{"name": "csrf"}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 422
    assert all(s["name"] != "csrf" for s in client.get("/api/sets").json())
