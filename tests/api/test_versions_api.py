"""Versions of sets, saved views and saved queries over a real server: GET answers the ETag,
a change sent with If-Match from an older version is refused with a 412 naming who saved the
newer one and when (and changes nothing), a change without If-Match still applies (scripts),
and filing members does not make a new version of their set."""

from __future__ import annotations

import re
from dataclasses import dataclass

import httpx
import pytest

from episodelake.api.settings import Settings
from episodelake.lake.ops import users
from tests.api.webapp_support import ServerThread, build_lake, error_of


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return build_lake(tmp_path_factory.mktemp("versions") / "lake")


@pytest.fixture(scope="module")
def tokens(lake):
    people = {"alice": "curator", "bob": "curator", "carol": "admin", "vic": "viewer"}
    return {name: users.add(lake, name, role, by="test")[1] for name, role in people.items()}


@pytest.fixture(scope="module")
def server(lake, tokens):
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        yield srv


@pytest.fixture
def as_(server, tokens):
    clients: list[httpx.Client] = []

    def client(name: str) -> httpx.Client:
        c = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tokens[name]}"}, timeout=30)
        clients.append(c)
        return c

    yield client
    for c in clients:
        c.close()


@dataclass
class Kind:
    """One versioned resource: how to make one, its URL, and two different changes of it."""

    name: str
    create: str  # POST path
    body: dict
    key: str  # the id field
    url: str  # the row's path, {id} filled in
    change: tuple[dict, dict]  # alice's and bob's
    field: str  # where the change shows
    shown: tuple[object, object]
    other: str = "alice"  # who edits it besides bob (a saved query: its owner's or an admin's)

    def of(self, row: dict) -> object:
        """The changed field of `row` as answered (a view's filters: its task)."""
        value = row[self.field]
        return value["task"] if self.field == "filters" else value


KINDS = [
    Kind("set", "/api/sets", {"name": "versioned set"}, "set_id", "/api/sets/{id}",
         ({"description": "alice's words"}, {"description": "bob's words"}), "description",
         ("alice's words", "bob's words")),
    Kind("view", "/api/views", {"name": "versioned view", "filters": {"success": False}}, "view_id",
         "/api/views/{id}", ({"filters": {"task": "wifi_on"}}, {"filters": {"task": "set_alarm"}}), "filters",
         ("wifi_on", "set_alarm")),
    Kind("saved query", "/api/sql/saved", {"name": "versioned query", "query": "select 1"}, "query_id",
         "/api/sql/saved/{id}", ({"query": "select 2"}, {"query": "select 3"}), "query", ("select 2", "select 3"), other="carol"),
]


def made(client: httpx.Client, kind: Kind, suffix: str) -> str:
    r = client.post(kind.create, json={**kind.body, "name": f"{kind.body['name']} {suffix}"})
    assert r.status_code == 201, r.text
    assert r.headers["etag"] == '"1"' and r.json()["version"] == 1 and r.json()["changed_by"] == "bob"
    return kind.url.format(id=r.json()[kind.key])


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_a_change_from_an_older_version_is_refused_naming_who_saved_the_newer(as_, kind):
    alice, bob = as_(kind.other), as_("bob")
    url = made(bob, kind, "stale")
    # both open it: the same version
    seen_by_alice = alice.get(url)
    assert seen_by_alice.status_code == 200 and seen_by_alice.headers["etag"] == '"1"'
    assert bob.get(url).headers["etag"] == '"1"'
    # bob saves first
    saved = bob.patch(url, json=kind.change[1], headers={"If-Match": '"1"'})
    assert saved.status_code == 200, saved.text
    assert saved.headers["etag"] == '"2"' and saved.json()["version"] == 2 and saved.json()["changed_by"] == "bob"
    # alice saves from the version she opened: refused, and told who and when
    stale = alice.patch(url, json=kind.change[0], headers={"If-Match": seen_by_alice.headers["etag"]})
    assert stale.status_code == 412, stale.text
    error = error_of(stale)
    assert error["type"] == "StaleVersion"
    assert "changed by bob at " in error["message"] and "now version 2" in error["message"]
    assert re.search(r"at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", error["message"]), error["message"]
    # nothing of alice's was written: bob's change stands
    now = alice.get(url)
    assert kind.of(now.json()) == kind.shown[1] and now.headers["etag"] == '"2"'
    # alice merges and saves with the version she now has: it goes through
    merged = alice.patch(url, json=kind.change[0], headers={"If-Match": now.headers["etag"]})
    assert merged.status_code == 200, merged.text
    assert kind.of(merged.json()) == kind.shown[0] and merged.headers["etag"] == '"3"'
    assert merged.json()["changed_by"] == kind.other


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_without_if_match_a_change_applies_as_before(as_, kind):
    bob = as_("bob")
    url = made(bob, kind, "script")
    bob.patch(url, json=kind.change[1])  # version 2
    r = bob.patch(url, json=kind.change[0])  # a script: no If-Match, no refusal
    assert r.status_code == 200 and kind.of(r.json()) == kind.shown[0] and r.headers["etag"] == '"3"'
    assert bob.patch(url, json=kind.change[1], headers={"If-Match": "*"}).status_code == 200


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_a_stale_delete_is_refused_and_keeps_the_row(as_, kind):
    bob, carol = as_("bob"), as_("carol")  # deleting a set is an admin's
    url = made(bob, kind, "delete")
    bob.patch(url, json=kind.change[1])
    assert carol.delete(url, headers={"If-Match": '"1"'}).status_code == 412
    assert carol.get(url).status_code == 200
    assert carol.delete(url, headers={"If-Match": '"2"'}).status_code == 204
    assert carol.get(url).status_code == 404


@pytest.mark.parametrize("header", ['3', 'W/"3"', '"x"', '"1", nonsense'])
def test_a_malformed_if_match_is_refused_naming_the_header(as_, header):
    bob = as_("bob")
    url = made(bob, KINDS[0], f"malformed {header}")
    r = bob.patch(url, json={"description": "x"}, headers={"If-Match": header})
    assert r.status_code == 422 and error_of(r)["message"].startswith("If-Match:"), r.text
    assert bob.get(url).json()["description"] is None


def test_if_match_may_list_several_versions(as_):
    bob = as_("bob")
    url = made(bob, KINDS[0], "listed")
    assert bob.patch(url, json={"description": "a"}, headers={"If-Match": '"7", "1"'}).status_code == 200
    assert bob.patch(url, json={"description": "b"}, headers={"If-Match": '"7", "1"'}).status_code == 412


def test_filing_members_is_not_a_new_version_of_the_set(as_):
    alice, bob = as_("alice"), as_("bob")
    url = made(bob, KINDS[0], "members")
    set_id = url.rsplit("/", 1)[1]
    for episode in ("wifi_on-0", "wifi_on-1"):
        assert bob.put(f"/api/sets/{set_id}/members/{episode}", json={"failure_category": "grounding"}).status_code == 200
    assert bob.get(url).headers["etag"] == '"1"'
    r = alice.patch(url, json={"description": "still mine to save"}, headers={"If-Match": '"1"'})
    assert r.status_code == 200 and r.json()["members"] == 2


def test_listings_carry_each_rows_version(as_):
    bob = as_("bob")
    url = made(bob, KINDS[1], "listed")
    bob.patch(url, json=KINDS[1].change[0])
    view_id = url.rsplit("/", 1)[1]
    listed = {v["view_id"]: v for v in bob.get("/api/views").json()}
    assert listed[view_id]["version"] == 2 and listed[view_id]["changed_by"] == "bob"
    assert all(s["version"] >= 1 for s in bob.get("/api/sets").json())
    assert all(q["version"] >= 1 for q in bob.get("/api/sql/saved").json())


def test_a_stale_assignment_of_a_view_is_refused(as_):
    alice, bob = as_("alice"), as_("bob")
    url = made(bob, KINDS[1], "assigned")
    assert bob.put(url + "/assignee", json={"assigned_to": "bob"}, headers={"If-Match": '"1"'}).status_code == 200
    stale = alice.put(url + "/assignee", json={"assigned_to": "alice"}, headers={"If-Match": '"1"'})
    assert stale.status_code == 412 and "changed by bob" in error_of(stale)["message"]
    assert alice.delete(url + "/assignee", headers={"If-Match": '"1"'}).status_code == 412
    assert alice.get(url).json()["assigned_to"] == "bob"


def test_a_saved_query_is_its_owners_or_an_admins_to_change(as_):
    alice, bob, carol = as_("alice"), as_("bob"), as_("carol")
    url = made(bob, KINDS[2], "owned")
    refused = alice.patch(url, json={"query": "select 99"}, headers={"If-Match": '"1"'})
    assert refused.status_code == 403 and "bob's" in error_of(refused)["message"]
    renamed = carol.patch(url, json={"name": "renamed by carol"}, headers={"If-Match": '"1"'})
    assert renamed.status_code == 200 and renamed.json()["name"] == "renamed by carol"
    assert renamed.json()["query"] == "select 1"
    clash = bob.patch(url, json={"name": "versioned query stale"})
    assert clash.status_code == 409, clash.text
    audit = bob.get("/api/audit", params={"target_id": url.rsplit("/", 1)[1]}).json()
    assert [a["action"] for a in audit] == ["query.update", "query.save"]
    assert audit[0]["before"]["name"] == "versioned query owned" and audit[0]["after"]["name"] == "renamed by carol"


def test_a_viewer_reads_versions_and_changes_none(as_):
    bob, vic = as_("bob"), as_("vic")
    url = made(bob, KINDS[2], "viewer")
    assert vic.get(url).headers["etag"] == '"1"'
    assert vic.patch(url, json={"query": "select 5"}, headers={"If-Match": '"1"'}).status_code == 403
