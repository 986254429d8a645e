"""People and roles over a real server: once the lake has users every request needs one's
token (loopback included); viewers read, curators curate under their own name, admins delete
and manage users; every change lands in the audit log; tokens never ride in URLs but at `/`."""

from __future__ import annotations

import socket

import httpx
import pytest

from episodelake.api.cli import main
from episodelake.api.settings import Settings
from episodelake.lake.ops import users
from tests.api.webapp_support import ServerThread, build_lake, error_of
from tests.waiting import wait_for


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return build_lake(tmp_path_factory.mktemp("people") / "lake")


@pytest.fixture(scope="module")
def tokens(lake):
    return {role: users.add(lake, f"{role}-1", role, by="test")[1] for role in ("viewer", "curator", "admin")}


@pytest.fixture(scope="module")
def server(lake, tokens):
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        yield srv


def as_(server, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)


def test_with_users_loopback_needs_a_token_too(server, tokens):
    with as_(server, None) as c:
        for path in ("/api/health", "/api/episodes", "/openapi.json", "/api/me"):
            r = c.get(path)
            assert r.status_code == 401 and "token" in error_of(r)["message"], path
        page = c.get("/", headers={"Accept": "text/html"})
        assert page.status_code == 401 and 'action="/signin"' in page.text and "password" in page.text
    with as_(server, "elk_not-a-real-token") as c:
        assert c.get("/api/health").status_code == 401


def test_each_role_knows_who_it_is(server, tokens):
    for role, token in tokens.items():
        with as_(server, token) as c:
            assert c.get("/api/me").json() == {"name": f"{role}-1", "role": role, "sign_in": True}


def test_a_viewer_reads_and_is_refused_every_change(server, tokens, lake):
    before = lake.sql("select count(*) from sets").column(0)[0].as_py()
    with as_(server, tokens["viewer"]) as c:
        assert c.get("/api/episodes").status_code == 200
        assert c.post("/api/sql", json={"query": "select count(*) n from episodes"}).status_code == 200
        refused = [c.post("/api/sets", json={"name": "viewer's"}),
                   c.put("/api/sets/set-x/members/wifi_on-0", json={}),
                   c.post("/api/episodes/wifi_on-0/annotations", json={"label": "x"}),
                   c.post("/api/views", json={"name": "v", "filters": {}}),
                   c.post("/api/users", json={"name": "x", "role": "admin"})]
        assert c.get("/api/users").status_code == 200  # who is on the team: readable, to assign work
    for r in refused:
        assert r.status_code == 403, r.request.url
        message = error_of(r)["message"]
        assert "viewer-1 is a viewer" in message and ("curator role" in message or "admin role" in message)
    lake.invalidate()
    assert lake.sql("select count(*) from sets").column(0)[0].as_py() == before


def test_a_curator_curates_under_their_own_name_and_the_audit_says_so(server, tokens):
    with as_(server, tokens["curator"]) as c:
        made = c.post("/api/sets", json={"name": "curator's failures"}).json()
        assert made["created_by"] == "curator-1"
        # a body claiming someone else is overruled by the token
        member = c.put(f"/api/sets/{made['set_id']}/members/wifi_on-1",
                       json={"note": "taps the wrong toggle", "added_by": "someone-else"}).json()
        assert member["added_by"] == "curator-1"
        c.put(f"/api/sets/{made['set_id']}/members/wifi_on-1", json={"note": "toggle at step 2"})
        note = c.post("/api/episodes/wifi_on-1/annotations", json={"label": "bad", "author": "x"}).json()
        assert note["author"] == "curator-1"
        refused = c.delete(f"/api/sets/{made['set_id']}")
        assert refused.status_code == 403 and "admin role" in error_of(refused)["message"]
        log = c.get("/api/audit", params={"who": "curator-1"}).json()
    actions = [e["action"] for e in log]
    assert actions[:4] == ["annotation.create", "member.put", "member.put", "set.create"]
    changed = log[1]
    assert changed["target_id"] == f"{made['set_id']}/wifi_on-1"
    assert changed["before"]["note"] == "taps the wrong toggle" and changed["after"]["note"] == "toggle at step 2"
    assert log[2]["before"] is None and log[3]["after"]["name"] == "curator's failures"
    with as_(server, tokens["admin"]) as c:
        assert c.delete(f"/api/sets/{made['set_id']}").status_code == 204
        last = c.get("/api/audit", params={"target_id": made["set_id"]}).json()[0]
    assert last["action"] == "set.delete" and last["who"] == "admin-1" and last["after"] is None


def test_admins_manage_users_and_a_removed_token_stops_working(server, tokens):
    with as_(server, tokens["admin"]) as c:
        listed = {u["name"]: u["role"] for u in c.get("/api/users").json()}
        assert listed == {"viewer-1": "viewer", "curator-1": "curator", "admin-1": "admin"}
        made = c.post("/api/users", json={"name": "temp", "role": "viewer"})
        assert made.status_code == 201 and made.json()["token"].startswith("elk_")
        assert "token_sha256" not in made.json()
        again = c.post("/api/users", json={"name": "temp", "role": "curator"})
        assert again.status_code == 409 and "exists" in error_of(again)["message"]
        bad = c.post("/api/users", json={"name": "temp", "role": "owner"})
        assert bad.status_code == 422 and "role" in error_of(bad)["message"]
        temp = made.json()["token"]
        with as_(server, temp) as t:
            assert t.get("/api/me").json()["name"] == "temp"
        assert c.delete("/api/users/temp").status_code == 204
    with as_(server, temp) as t:
        wait_for(lambda: t.get("/api/me").status_code == 401, users.REFRESH_S + 3, every_s=0.2,
                 what="a removed user's token to stop working")


def test_token_hashes_never_reach_sql(server, tokens):
    with as_(server, tokens["admin"]) as c:
        r = c.post("/api/sql", json={"query": "select * from users"})
        assert r.status_code == 200 and "token_sha256" not in r.json()["columns"]
        r = c.post("/api/sql", json={"query": "select token_sha256 from users"})
        assert r.status_code == 400


def test_tokens_in_urls_only_sign_a_browser_in_at_the_root(server, tokens):
    with httpx.Client(base_url=server.url) as c:
        r = c.get("/api/health", params={"token": tokens["viewer"]})
        assert r.status_code == 401 and "URL" in error_of(r)["message"]
        r = c.get("/", params={"token": tokens["viewer"]})
        assert r.status_code == 303 and r.headers["location"] == "/"
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert c.get("/api/me").json()["name"] == "viewer-1"  # the cookie carries it now
        assert c.post("/signout", headers={"Origin": server.url}).status_code == 303
        assert c.get("/api/me").status_code == 401
        wrong = c.post("/signin", data={"token": "elk_wrong"})
        assert wrong.status_code == 401 and "not (or no longer) valid" in wrong.text
        right = c.post("/signin", data={"token": tokens["curator"]})
        assert right.status_code == 303
        assert c.get("/api/me").json()["name"] == "curator-1"


def test_health_shows_where_the_lake_lives_to_admins_only(server, tokens, lake):
    with as_(server, tokens["viewer"]) as c:
        body = c.get("/api/health").json()
    assert body["lake"] == "lake" and body["location"] is None and str(lake.path) not in str(body)
    with as_(server, tokens["admin"]) as c:
        assert c.get("/api/health").json()["location"] == str(lake.path)


@pytest.mark.parametrize("value", [True, 1.0, "1"])
def test_failing_step_must_be_a_real_integer(server, tokens, value):
    with as_(server, tokens["curator"]) as c:
        made = c.post("/api/sets", json={"name": f"strict {value!r}"}).json()
        r = c.put(f"/api/sets/{made['set_id']}/members/wifi_on-0", json={"failing_step": value})
    assert r.status_code == 422 and "failing_step" in error_of(r)["message"]


def test_the_openapi_document_declares_id_patterns_and_roles(server, tokens):
    with as_(server, tokens["viewer"]) as c:
        doc = c.get("/openapi.json").json()
        bad = c.get("/api/sets/a..b")
    parameter = doc["paths"]["/api/sets/{set_id}"]["get"]["parameters"][0]
    assert parameter["schema"]["pattern"] and parameter["schema"]["maxLength"] == 200
    assert doc["paths"]["/api/sets/{set_id}"]["delete"]["x-role"] == "admin"
    assert doc["paths"]["/api/sql"]["post"]["x-role"] == "viewer"
    assert bad.status_code == 422 and "set_id" in error_of(bad)["message"]


def test_the_host_header_is_checked_on_shared_binds_with_a_token(lake, tokens):
    settings = Settings(lake=lake.path, host="127.0.0.2", token="a-server-token-0123456789", static_dir=None)
    with ServerThread(settings, lake) as srv:
        def status(host: str) -> int:
            with socket.create_connection((srv.host, srv.port)) as sock:
                sock.sendall(f"GET /api/me HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer "
                             f"{tokens['viewer']}\r\nConnection: close\r\n\r\n".encode())
                return int(sock.recv(100).split()[1])
        assert status(f"127.0.0.2:{srv.port}") == 200
        assert status("rebind.evil.example") == 400
    opened = Settings(lake=lake.path, host="127.0.0.2", token="a-server-token-0123456789", static_dir=None,
                      allowed_hosts=("lake.example.org",))
    assert "lake.example.org" in (opened.host_names() or [])
    assert Settings(lake=lake.path, allowed_hosts=("*",)).host_names() is None


def test_the_command_line_adds_lists_and_removes_users(tmp_path, capsys):
    lake = build_lake(tmp_path / "lake")
    where = ["--lake", str(lake.path)]
    assert main([*where, "user", "list"]) == 0
    assert "no users" in capsys.readouterr().out
    assert main([*where, "user", "add", "ana", "--role", "admin"]) == 0
    out = capsys.readouterr().out
    token = next(line for line in out.splitlines() if line.startswith("elk_"))
    assert users.Directory(lake, refresh_s=0).authenticate(token).role == "admin"  # type: ignore[union-attr]
    assert main([*where, "user", "add", "bo"]) == 0
    capsys.readouterr()
    assert main([*where, "user", "remove", "ana"]) == 1  # the last admin, with others left
    assert "last admin" in capsys.readouterr().err
    assert main([*where, "user", "remove", "bo"]) == 0
    assert capsys.readouterr().out == "removed bo\n"
    assert main([*where, "user", "list"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith("ana\tadmin\t") and "bo" not in listed
    trail = lake.sql("select action, who from audit order by changed_at").to_pylist()
    assert [t["action"] for t in trail] == ["user.add", "user.add", "user.remove"]
    assert all(t["who"].startswith("cli") for t in trail)


def test_a_curator_files_everything_a_filter_matches_at_once(server, tokens, lake):
    with as_(server, tokens["curator"]) as c:
        made = c.post("/api/sets", json={"name": "bulk"}).json()
        c.put(f"/api/sets/{made['set_id']}/members/wifi_on-0", json={"note": "curated by hand"})
        r = c.post(f"/api/sets/{made['set_id']}/members", json={"filter": {"task": "wifi_on"},
                                                                  "failure_category": "planning"})
        assert r.status_code == 200 and r.json() == {"set_id": made["set_id"], "added": 2, "already": 1}
        members = {m["episode_id"]: m for m in c.get(f"/api/sets/{made['set_id']}/members").json()}
        assert set(members) == {"wifi_on-0", "wifi_on-1", "wifi_on-2"}
        assert members["wifi_on-0"]["note"] == "curated by hand" and members["wifi_on-0"]["failure_category"] is None
        assert members["wifi_on-1"]["failure_category"] == "planning" and members["wifi_on-1"]["added_by"] == "curator-1"
        listed = c.post(f"/api/sets/{made['set_id']}/members", json={"episode_ids": ["set_alarm-0", "set_alarm-0"]})
        assert listed.json()["added"] == 1
        unknown = c.post(f"/api/sets/{made['set_id']}/members", json={"episode_ids": ["set_alarm-0", "nope-9"]})
        assert unknown.status_code == 404 and "nope-9" in error_of(unknown)["message"]
        both = c.post(f"/api/sets/{made['set_id']}/members", json={"episode_ids": ["a"], "filter": {}})
        assert both.status_code == 422 and "one of the two" in error_of(both)["message"]
        nothing = c.post(f"/api/sets/{made['set_id']}/members", json={"filter": {"task": "no-such-task"}})
        assert nothing.status_code == 422 and "at least one" in error_of(nothing)["message"]
        log = c.get("/api/audit", params={"target_id": made["set_id"]}).json()
    assert sum(e["action"] == "member.put" for e in log) == 4
    with as_(server, tokens["viewer"]) as v:
        assert v.post(f"/api/sets/{made['set_id']}/members", json={"episode_ids": ["send_message-0"]}).status_code == 403


def test_two_reviewers_agree_or_dispute_and_a_set_is_assigned(server, tokens, lake):
    extra = users.add(lake, "curator-2", "curator", by="test")[1]
    with as_(server, tokens["curator"]) as ann, as_(server, extra) as bo:
        made = ann.post("/api/sets", json={"name": "to review"}).json()
        sid = made["set_id"]
        assigned = ann.patch(f"/api/sets/{sid}", json={"assigned_to": "curator-2"})
        assert assigned.status_code == 200 and assigned.json()["assigned_to"] == "curator-2"
        stranger = ann.patch(f"/api/sets/{sid}", json={"assigned_to": "nobody"})
        assert stranger.status_code == 422 and "not a user" in error_of(stranger)["message"]
        for episode in ("wifi_on-0", "wifi_on-1"):
            ann.put(f"/api/sets/{sid}/members/{episode}", json={"failure_category": "grounding"})
        state = {m["episode_id"]: m["review_state"] for m in ann.get(f"/api/sets/{sid}/members").json()}
        assert state == {"wifi_on-0": "to review", "wifi_on-1": "to review"}
        for client in (ann, bo):
            r = client.put(f"/api/sets/{sid}/members/wifi_on-0/review",
                           json={"failure_category": "grounding", "failing_step": 1})
            assert r.status_code == 200
        ann.put(f"/api/sets/{sid}/members/wifi_on-1/review", json={"failure_category": "grounding"})
        bo.put(f"/api/sets/{sid}/members/wifi_on-1/review", json={"failure_category": "planning",
                                                                   "reviewer": "someone-else"})
        listed = {m["episode_id"]: m for m in ann.get(f"/api/sets/{sid}/members").json()}
        not_member = bo.put(f"/api/sets/{sid}/members/set_alarm-0/review", json={})
    assert listed["wifi_on-0"]["review_state"] == "agreed"
    disputed = listed["wifi_on-1"]
    assert disputed["review_state"] == "disputed"
    assert [(r["reviewer"], r["failure_category"]) for r in disputed["reviews"]] == [
        ("curator-1", "grounding"), ("curator-2", "planning")]  # the token names the reviewer, not the body
    assert disputed["failure_category"] == "grounding"  # a review is a second opinion, not an edit
    assert not_member.status_code == 404
    with as_(server, tokens["viewer"]) as v:
        assert v.put(f"/api/sets/{sid}/members/wifi_on-0/review", json={}).status_code == 403


def test_saved_queries_are_shared_with_their_owner(server, tokens):
    query = "select task_name, count(*) n from episodes group by all"
    with as_(server, tokens["curator"]) as ann, as_(server, tokens["admin"]) as admin, \
            as_(server, tokens["viewer"]) as viewer:
        made = ann.post("/api/sql/saved", json={"name": "episodes per task", "query": query})
        assert made.status_code == 201 and made.json()["owner"] == "curator-1"
        listed = viewer.get("/api/sql/saved").json()
        assert [(q["name"], q["owner"], q["query"]) for q in listed] == [("episodes per task", "curator-1", query)]
        again = ann.post("/api/sql/saved", json={"name": "episodes per task", "query": "select 1"})
        assert again.status_code == 409 and "curator-1" in error_of(again)["message"]
        assert viewer.post("/api/sql/saved", json={"name": "mine", "query": "select 1"}).status_code == 403
        theirs = admin.post("/api/sql/saved", json={"name": "admin's", "query": "select 2"}).json()
        refused = ann.delete(f"/api/sql/saved/{theirs['query_id']}")
        assert refused.status_code == 403 and "owner" in error_of(refused)["message"]
        assert ann.delete(f"/api/sql/saved/{made.json()['query_id']}").status_code == 204
        assert admin.delete(f"/api/sql/saved/{theirs['query_id']}").status_code == 204
        assert viewer.get("/api/sql/saved").json() == []
