"""Managing people over the API, as the web app's admin page does: an admin adds and removes
users, changes a role and reissues a token (the old one stops working); nobody else may;
the last admin stays an admin; each change is an audit row under the admin's name, without
the token or its hash."""

from __future__ import annotations

import httpx
import pytest

from episodelake.api.settings import Settings
from episodelake.lake.ops import users
from tests.api.webapp_support import ServerThread, build_lake, error_of
from tests.waiting import wait_for


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return build_lake(tmp_path_factory.mktemp("user-admin") / "lake")


@pytest.fixture(scope="module")
def tokens(lake):
    people = {"root": "admin", "cura": "curator", "vee": "viewer"}
    return {name: users.add(lake, name, role, by="test")[1] for name, role in people.items()}


@pytest.fixture(scope="module")
def server(lake, tokens):
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        yield srv


def as_(server, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_an_admin_changes_a_role_and_the_audit_says_who(server, tokens):
    with as_(server, tokens["root"]) as root:
        added = root.post("/api/users", json={"name": "newbie", "role": "viewer"})
        assert added.status_code == 201 and added.json()["token"].startswith("elk_")
        r = root.patch("/api/users/newbie", json={"role": "curator"})
        assert r.status_code == 200 and r.json()["role"] == "curator" and "token_sha256" not in r.json()
        listed = {u["name"]: u["role"] for u in root.get("/api/users").json()}
        assert listed["newbie"] == "curator"
        audit = root.get("/api/audit", params={"target_id": "newbie"}).json()
        assert [(a["action"], a["who"]) for a in audit] == [("user.role", "root"), ("user.add", "root")]
        assert audit[0]["before"]["role"] == "viewer" and audit[0]["after"]["role"] == "curator"
        assert all("token_sha256" not in (a["after"] or {}) for a in audit)
    with as_(server, added.json()["token"]) as newbie:  # the same token, the new role (within REFRESH_S)
        wait_for(lambda: newbie.get("/api/me").json()["role"] == "curator", 10, what="the new role to be known")


def test_a_reissued_token_replaces_the_old_one(server, tokens):
    with as_(server, tokens["root"]) as root:
        old = root.post("/api/users", json={"name": "forgetful", "role": "curator"}).json()["token"]
        r = root.post("/api/users/forgetful/token")
        assert r.status_code == 200 and r.json()["name"] == "forgetful" and r.json()["role"] == "curator"
        new = r.json()["token"]
        assert new != old and new.startswith("elk_")
        audit = root.get("/api/audit", params={"target_id": "forgetful"}).json()
        assert audit[0]["action"] == "user.reissue" and audit[0]["who"] == "root"
        assert old not in str(audit) and new not in str(audit) and "token_sha256" not in str(audit)
    with as_(server, new) as c:
        assert c.get("/api/me").json()["name"] == "forgetful"
    with as_(server, old) as c:
        wait_for(lambda: c.get("/api/me").status_code == 401, 10, what="the old token to stop working")


def test_only_an_admin_manages_people(server, tokens):
    for name in ("cura", "vee"):
        with as_(server, tokens[name]) as c:
            for r in (c.patch("/api/users/vee", json={"role": "admin"}), c.post("/api/users/vee/token"),
                      c.delete("/api/users/vee"), c.post("/api/users", json={"name": "x", "role": "admin"})):
                assert r.status_code == 403 and "admin role" in error_of(r)["message"], r.request.url
    with as_(server, tokens["vee"]) as c:
        assert c.get("/api/me").json()["role"] == "viewer"


def test_the_last_admin_stays_an_admin_and_names_are_checked(server, tokens):
    with as_(server, tokens["root"]) as root:
        r = root.patch("/api/users/root", json={"role": "curator"})
        assert r.status_code == 409 and "last admin" in error_of(r)["message"]
        missing = root.patch("/api/users/nobody", json={"role": "curator"})
        assert missing.status_code == 404 and "root" in error_of(missing)["message"]
        assert root.post("/api/users/nobody/token").status_code == 404
        bad = root.patch("/api/users/vee", json={"role": "owner"})
        assert bad.status_code == 422 and "role" in error_of(bad)["message"]
        assert root.get("/api/me").json()["role"] == "admin"
