"""Curation through the API: sets, members, annotations; each change durable and visible to
SQL at once, soft deletes, and errors that name the field."""

from __future__ import annotations

import pytest

from tests.api.webapp_support import error_of


def sql(client, query: str) -> list[list]:
    r = client.post("/api/sql", json={"query": query})
    assert r.status_code == 200, r.text
    return r.json()["rows"]


@pytest.fixture
def failure_set(client):
    r = client.post("/api/sets", json={"name": f"fails-{id(client)}", "kind": "failure", "description": "bad runs"})
    assert r.status_code == 201, r.text
    yield r.json()
    client.delete(f"/api/sets/{r.json()['set_id']}")


def test_create_rename_describe_kind(client, failure_set):
    sid = failure_set["set_id"]
    assert failure_set["members"] == 0 and failure_set["kind"] == "failure"
    r = client.patch(f"/api/sets/{sid}", json={"name": "renamed-" + sid, "kind": "regression"})
    assert r.status_code == 200 and r.json()["name"] == "renamed-" + sid and r.json()["kind"] == "regression"
    assert r.json()["description"] == "bad runs"  # fields not sent are kept
    r = client.patch(f"/api/sets/{sid}", json={"description": None})
    assert r.json()["description"] is None
    assert sql(client, f"select name, kind from sets where set_id = '{sid}'") == [["renamed-" + sid, "regression"]]
    assert any(s["set_id"] == sid for s in client.get("/api/sets").json())


def test_set_validation_names_the_field(client, failure_set):
    r = client.post("/api/sets", json={"name": failure_set["name"]})
    assert r.status_code == 409 and "name" in error_of(r)["message"]
    r = client.post("/api/sets", json={"name": "x", "kind": "favourites"})
    assert r.status_code == 422 and "kind" in error_of(r)["message"]
    r = client.post("/api/sets", json={"name": ""})
    assert r.status_code == 422 and "name" in error_of(r)["message"]
    r = client.post("/api/sets", json={"name": "y", "colour": "red"})
    assert r.status_code == 422 and "colour" in error_of(r)["message"]
    r = client.patch(f"/api/sets/{failure_set['set_id']}", json={"pinned_tag": "no-such-tag"})
    assert r.status_code == 404 and "pinned_tag" in error_of(r)["message"]


def test_names_with_control_characters_are_refused_before_they_reach_a_terminal(client, failure_set):
    for name in ("red\x1b[31m", "ring\x07", "two\nlines"):
        r = client.post("/api/sets", json={"name": name})
        assert r.status_code == 422 and error_of(r)["message"].startswith("name holds"), (name, r.text)
    r = client.patch(f"/api/sets/{failure_set['set_id']}", json={"name": "x\x1b"})
    assert r.status_code == 422 and "name" in error_of(r)["message"]
    r = client.post("/api/views", json={"name": "v\x07", "filters": {}})
    assert r.status_code == 422 and "name" in error_of(r)["message"]
    # a note keeps its line breaks, but not an escape sequence
    ep = client.get("/api/episodes").json()["items"][0]["episode_id"]
    path = f"/api/sets/{failure_set['set_id']}/members/{ep}"
    assert client.put(path, json={"note": "line one\nline two"}).status_code == 200
    r = client.put(path, json={"note": "\x1b]0;pwned\x07"})
    assert r.status_code == 422 and "note" in error_of(r)["message"]
    assert [s["name"] for s in client.get("/api/sets").json()] == [failure_set["name"]]


def test_pin_to_a_tag(client, lake, failure_set):
    if "curation-test" not in lake.tags():
        lake.create_tag("curation-test")
    sid = failure_set["set_id"]
    assert client.patch(f"/api/sets/{sid}", json={"pinned_tag": "curation-test"}).json()["pinned_tag"] == "curation-test"
    assert "curation-test" in client.get("/api/health").json()["tags"]
    assert client.patch(f"/api/sets/{sid}", json={"pinned_tag": None}).json()["pinned_tag"] is None


def test_members_with_category_failing_step_and_note(client, failure_set):
    sid = failure_set["set_id"]
    r = client.put(f"/api/sets/{sid}/members/wifi_on-1",
                   json={"failure_category": "grounding", "failing_step": 1, "note": "tapped the wrong row", "added_by": "ana"})
    assert r.status_code == 200, r.text
    m = r.json()
    assert (m["failure_category"], m["failing_step"], m["note"], m["added_by"]) == ("grounding", 1, "tapped the wrong row", "ana")
    assert m["task_name"] == "wifi_on" and m["success"] is False
    # visible to SQL and to the episode view at once
    assert sql(client, f"select episode_id, failure_category, failing_step from set_members where set_id = '{sid}' and not removed") == [["wifi_on-1", "grounding", 1]]
    d = client.get("/api/episodes/wifi_on-1").json()
    assert [(x["set_id"], x["failure_category"]) for x in d["memberships"]] == [(sid, "grounding")]
    assert client.get(f"/api/sets/{sid}").json()["members"] == 1
    assert [e["episode_id"] for e in client.get("/api/episodes", params={"set_id": sid}).json()["items"]] == ["wifi_on-1"]
    # replace the member's fields
    m = client.put(f"/api/sets/{sid}/members/wifi_on-1", json={"failure_category": "planning", "failing_step": 2}).json()
    assert (m["failure_category"], m["failing_step"], m["note"]) == ("planning", 2, None)
    # remove: soft, so the row stays for older versions and SQL can see the flag
    assert client.delete(f"/api/sets/{sid}/members/wifi_on-1").status_code == 204
    assert client.get(f"/api/sets/{sid}/members").json() == []
    assert client.get("/api/episodes/wifi_on-1").json()["memberships"] == []
    assert sql(client, f"select removed from set_members where set_id = '{sid}'") == [[True]]
    assert client.delete(f"/api/sets/{sid}/members/wifi_on-1").status_code == 404


def test_member_validation_names_the_field(client, failure_set):
    sid = failure_set["set_id"]
    cases = [
        ("wifi_on-1", {"failure_category": "vibes"}, 422, "failure_category"),
        ("wifi_on-1", {"failing_step": 40}, 422, "failing_step"),
        ("wifi_on-1", {"failing_step": -1}, 422, "failing_step"),
        ("nope", {}, 404, "nope"),
        ("a..b", {}, 422, "episode_id"),
    ]
    for episode, body, status, words in cases:
        r = client.put(f"/api/sets/{sid}/members/{episode}", json=body)
        assert r.status_code == status, (episode, body, r.text)
        assert words in error_of(r)["message"]
    r = client.put("/api/sets/set-missing/members/wifi_on-1", json={})
    assert r.status_code == 404 and "set-missing" in error_of(r)["message"]


def test_deleted_set_is_gone_but_kept_as_a_flag(client):
    sid = client.post("/api/sets", json={"name": "to-delete"}).json()["set_id"]
    client.put(f"/api/sets/{sid}/members/set_alarm-0", json={"failure_category": "other"})
    assert client.delete(f"/api/sets/{sid}").status_code == 204
    assert client.get(f"/api/sets/{sid}").status_code == 404
    assert all(s["set_id"] != sid for s in client.get("/api/sets").json())
    assert client.get("/api/episodes/set_alarm-0").json()["memberships"] == []
    assert sql(client, f"select deleted from sets where set_id = '{sid}'") == [[True]]
    # the name is free again
    again = client.post("/api/sets", json={"name": "to-delete"})
    assert again.status_code == 201
    client.delete(f"/api/sets/{again.json()['set_id']}")


def test_step_annotations(client):
    r = client.post("/api/episodes/set_alarm-1/annotations", json={"step": 1, "label": "misread", "note": "clock confused"})
    assert r.status_code == 201, r.text
    ann = r.json()
    whole = client.post("/api/episodes/set_alarm-1/annotations", json={"note": "whole episode"}).json()
    listed = client.get("/api/episodes/set_alarm-1/annotations").json()
    assert [a["annotation_id"] for a in listed] == [whole["annotation_id"], ann["annotation_id"]]
    assert sql(client, f"select label, step from annotations where annotation_id = '{ann['annotation_id']}'") == [["misread", 1]]
    assert client.get("/api/episodes/set_alarm-1").json()["annotations"][1]["label"] == "misread"
    assert client.delete(f"/api/annotations/{ann['annotation_id']}").status_code == 204
    assert [a["annotation_id"] for a in client.get("/api/episodes/set_alarm-1/annotations").json()] == [whole["annotation_id"]]
    assert client.delete(f"/api/annotations/{ann['annotation_id']}").status_code == 404
    r = client.post("/api/episodes/set_alarm-1/annotations", json={"step": 0})
    assert r.status_code == 422 and "label or note" in error_of(r)["message"]
    r = client.post("/api/episodes/set_alarm-1/annotations", json={"step": 50, "note": "x"})
    assert r.status_code == 422 and "step" in error_of(r)["message"]


def test_a_set_deleted_by_another_process_refuses_members_at_once(lake):
    """The live sets are remembered per version of the sets table: a deletion made through
    another `Lake` (another process) is seen by the next write, not after a delay."""
    from episodelake.lake.curation import curation
    from episodelake.lake.storage.errors import NotFound
    from episodelake.lake.storage.lake import Lake

    s = curation.create_set(lake, "deleted-elsewhere")
    curation.add_member(lake, s["set_id"], "wifi_on-2", note="before")
    curation.delete_set(Lake(lake.path, create=False), s["set_id"])
    with pytest.raises(NotFound, match="does not exist"):
        curation.add_member(lake, s["set_id"], "wifi_on-3", note="after")


def test_curation_survives_a_restart(lake, tmp_path):
    """Durable: a fresh Lake (a new server process) reads what the API wrote."""
    from episodelake.lake.curation import curation
    from episodelake.lake.storage.lake import Lake

    s = curation.create_set(lake, "durable-check")
    curation.add_member(lake, s["set_id"], "wifi_on-2", failure_category="perception", failing_step=0)
    fresh = Lake(lake.path, create=False)
    assert [(m["episode_id"], m["failure_category"]) for m in curation.members(fresh, s["set_id"])] == [("wifi_on-2", "perception")]
    curation.delete_set(lake, s["set_id"])
