"""What the web app's search, saved views, annotation queue and live list need from the API:
search by id prefix, task or goal; named filters shared through the lake; an episode's place
in a filtered list with its neighbours; an ETag on the episode list that changes only when
the lake does."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime

import httpx
import lance
import pyarrow as pa
import pytest

from episodelake.api.settings import Settings
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.curation import curation
from episodelake.lake.ops import users
from episodelake.lake.storage import layout, schema, tables
from episodelake.lake.storage.lake import Lake
from episodelake.lake.vocab.families import format_tool_call
from tests.api.webapp_support import ServerThread, build_lake, error_of, screen


def ids(client, **params) -> list[str]:
    r = client.get("/api/episodes", params={"limit": 500, **params})
    assert r.status_code == 200, r.text
    return [e["episode_id"] for e in r.json()["items"]]


# search ----------------------------------------------------------------------------------
def test_search_matches_id_prefix_task_and_goal_case_insensitively(client):
    assert ids(client, search="WIFI_ON-1") == ["wifi_on-1"]
    assert ids(client, search="alarm") == ["set_alarm-2", "set_alarm-1", "set_alarm-0"]
    assert ids(client, search="to ana") == ["send_message-2", "send_message-1", "send_message-0"]
    assert ids(client, search="  ") == ids(client)  # blank searches nothing
    assert ids(client, search="-1", success="false") == []  # an id matches by its start only
    assert ids(client, search="%") == [] and ids(client, search="wifi%on") == []  # % is a letter here
    r = client.get("/api/episodes", params={"search": "x" * 201})
    assert r.status_code == 422 and "search" in error_of(r)["message"]


def test_search_narrows_the_task_tree_like_every_filter(client):
    tasks = client.get("/api/tasks", params={"search": "7:30"}).json()
    assert [(t["task_name"], t["episodes"]) for t in tasks] == [("set_alarm", 3)]


# queue -----------------------------------------------------------------------------------
def test_queue_gives_position_total_and_neighbours_in_the_lists_order(client):
    failures = {"success": "false"}
    assert ids(client, **failures) == ["send_message-1", "set_alarm-1", "wifi_on-1"]
    r = client.get("/api/episodes/set_alarm-1/queue", params=failures)
    assert r.json() == {"position": 2, "total": 3, "previous": "send_message-1", "next": "wifi_on-1"}
    first = client.get("/api/episodes/send_message-1/queue", params=failures).json()
    assert (first["position"], first["previous"]) == (1, None)
    asc = client.get("/api/episodes/set_alarm-1/queue", params={**failures, "order": "asc"}).json()
    assert (asc["previous"], asc["next"]) == ("wifi_on-1", "send_message-1")
    # an episode the filter leaves out has no position, but still neighbours to go on to
    out = client.get("/api/episodes/set_alarm-0/queue", params=failures).json()
    assert out == {"position": None, "total": 3, "previous": "set_alarm-1", "next": "wifi_on-1"}


@pytest.mark.parametrize("sort, order", [("created_at", "desc"), ("task_name", "asc"), ("eval_score", "desc"),
                                         ("episode_length", "asc")])
def test_walking_the_queue_visits_the_list_in_order(client, sort, order):
    listed = ids(client, sort=sort, order=order)
    walked, at = [], listed[0]
    while at is not None:
        step = client.get(f"/api/episodes/{at}/queue", params={"sort": sort, "order": order}).json()
        assert step["position"] == len(walked) + 1 and step["total"] == len(listed)
        walked.append(at)
        at = step["next"]
    assert walked == listed
    back, at = [], listed[-1]
    while at is not None:
        back.append(at)
        at = client.get(f"/api/episodes/{at}/queue", params={"sort": sort, "order": order}).json()["previous"]
    assert back == listed[::-1]


def test_queue_of_an_unknown_episode_is_404(client):
    r = client.get("/api/episodes/nope-1/queue")
    assert r.status_code == 404 and "nope-1" in error_of(r)["message"]


# saved views -----------------------------------------------------------------------------
def test_saved_views_are_created_listed_and_deleted_through_the_lake(client, lake):
    r = client.post("/api/views", json={"name": "wifi failures", "filters": {"task": "wifi_on", "success": False}})
    assert r.status_code == 201, r.text
    view = r.json()
    assert view["view_id"].startswith("view-") and view["name"] == "wifi failures"
    assert view["filters"]["task"] == "wifi_on" and view["filters"]["success"] is False
    # stored with only the fields that were set, readable by anyone on the lake
    assert curation.get_view(Lake(lake.path), view["view_id"])["filters"] == {"success": False, "task": "wifi_on"}
    assert [v["name"] for v in client.get("/api/views").json()] == ["wifi failures"]

    again = client.post("/api/views", json={"name": "wifi failures", "filters": {}})
    assert again.status_code == 409 and view["view_id"] in error_of(again)["message"]
    assert client.delete(f"/api/views/{view['view_id']}").status_code == 204
    assert client.get(f"/api/views/{view['view_id']}").status_code == 404
    assert client.get("/api/views").json() == []
    # the name is free again once its view is deleted
    assert client.post("/api/views", json={"name": "wifi failures", "filters": {}}).status_code == 201


def test_a_saved_views_filters_are_replaced_and_the_audit_keeps_both(client, lake):
    view = client.post("/api/views", json={"name": "to update", "filters": {"task": "wifi_on", "success": False}}).json()
    r = client.patch(f"/api/views/{view['view_id']}", json={"filters": {"task": "wifi_on", "min_length": 5}})
    assert r.status_code == 200, r.text
    updated = r.json()
    set_fields = {k: v for k, v in updated["filters"].items() if v is not None and v is not False}
    assert set_fields == {"task": "wifi_on", "min_length": 5}  # replaced, not merged
    assert (updated["view_id"], updated["name"], updated["created_at"]) == (view["view_id"], "to update", view["created_at"])
    assert updated["updated_at"] > view["updated_at"]
    assert curation.get_view(Lake(lake.path), view["view_id"])["filters"] == {"min_length": 5, "task": "wifi_on"}
    change = client.get("/api/audit", params={"target_id": view["view_id"]}).json()[0]
    assert change["action"] == "view.update"
    assert json.loads(change["before"]["filters"]) == {"success": False, "task": "wifi_on"}, change
    assert json.loads(change["after"]["filters"]) == {"min_length": 5, "task": "wifi_on"}, change
    bad = client.patch(f"/api/views/{view['view_id']}", json={"filters": {"min_length": -1}})
    assert bad.status_code == 422 and "min_length" in error_of(bad)["message"]
    missing = client.patch("/api/views/view-nope", json={"filters": {}})
    assert missing.status_code == 404 and "view-nope" in error_of(missing)["message"]
    client.delete(f"/api/views/{view['view_id']}")
    assert client.patch(f"/api/views/{view['view_id']}", json={"filters": {}}).status_code == 404


def test_a_viewer_may_not_update_a_view_and_a_curators_update_is_theirs(tmp_path):
    lake = build_lake(tmp_path / "lake")
    tokens = {role: users.add(lake, f"{role}-1", role, by="test")[1] for role in ("viewer", "curator")}
    view = curation.create_view(lake, "shared", {"tag": "smoke"}, who="curator-1")
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        def patch(role: str) -> httpx.Response:
            return httpx.patch(f"{srv.url}/api/views/{view['view_id']}", json={"filters": {"task": "wifi_on"}},
                               headers={"Authorization": f"Bearer {tokens[role]}"})
        refused = patch("viewer")
        assert refused.status_code == 403 and "curator role" in error_of(refused)["message"]
        assert patch("curator").status_code == 200
        changes = httpx.get(f"{srv.url}/api/audit", params={"target_id": view["view_id"]},
                            headers={"Authorization": f"Bearer {tokens['viewer']}"}).json()
    assert [(c["action"], c["who"]) for c in changes] == [("view.update", "curator-1"), ("view.create", "curator-1")]


@pytest.mark.parametrize("body, field", [
    ({"name": "", "filters": {}}, "name"),
    ({"name": "x", "filters": {"min_length": -1}}, "min_length"),
    ({"name": "x", "filters": {"set_id": "../etc"}}, "set_id"),
    ({"name": "x"}, "filters"),
])
def test_a_bad_saved_view_is_refused_naming_the_field(client, body, field):
    r = client.post("/api/views", json=body)
    assert r.status_code == 422 and field in error_of(r)["message"], r.text


def test_a_lake_made_before_saved_views_gains_the_table_on_open(tmp_path):
    lake = build_lake(tmp_path / "old")
    shutil.rmtree(layout.table_path(lake.path, "saved_views"))
    reopened = Lake(tmp_path / "old")
    assert curation.list_views(reopened) == []
    curation.create_view(reopened, "mine", {"tag": "smoke"})
    assert [v["filters"] for v in curation.list_views(Lake(tmp_path / "old"))] == [{"tag": "smoke"}]


def test_a_saved_views_table_made_before_assignments_gains_the_column_on_open(tmp_path):
    """A lake whose saved_views has the first release's columns (no created_by, no
    assigned_to) opens, keeps its views, and can assign them."""
    lake = build_lake(tmp_path / "old")
    first = pa.schema([f for f in schema.SAVED_VIEWS if f.name not in ("created_by", "assigned_to")])
    shutil.rmtree(layout.table_path(lake.path, "saved_views"))
    lance.write_dataset(pa.Table.from_pylist([{"view_id": "view-old", "name": "old queue", "filters": '{"tag": "smoke"}',
                                               "deleted": False}], schema=first),
                        str(layout.table_path(lake.path, "saved_views")), enable_stable_row_ids=True)
    reopened = Lake(tmp_path / "old")
    assert tables.open_table(lake.path, "saved_views").schema == schema.SAVED_VIEWS
    [old] = curation.list_views(reopened)
    assert (old["name"], old["filters"], old["assigned_to"]) == ("old queue", {"tag": "smoke"}, None)
    curation.assign_view(reopened, "view-old", "bo")  # a lake without users: any name
    assert [v["view_id"] for v in curation.list_views(Lake(tmp_path / "old"), assigned_to="bo")] == ["view-old"]


def test_a_curator_assigns_a_view_as_another_curators_queue(tmp_path):
    lake = build_lake(tmp_path / "lake")
    tokens = {name: users.add(lake, name, role, by="test")[1]
              for name, role in (("viewer-1", "viewer"), ("curator-1", "curator"), ("curator-2", "curator"))}
    view = curation.create_view(lake, "wifi failures", {"task": "wifi_on", "success": False}, who="curator-1")
    curation.create_view(lake, "alarms", {"task": "set_alarm"}, who="curator-1")
    url = f"/api/views/{view['view_id']}/assignee"
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        def as_(name: str) -> httpx.Client:
            return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {tokens[name]}"}, timeout=30)

        with as_("curator-1") as ann, as_("curator-2") as bo, as_("viewer-1") as viewer:
            assigned = ann.put(url, json={"assigned_to": "curator-2"})
            assert assigned.status_code == 200, assigned.text
            assert assigned.json()["assigned_to"] == "curator-2" and assigned.json()["filters"]["task"] == "wifi_on"
            assert [v["name"] for v in bo.get("/api/me/views").json()] == ["wifi failures"]
            assert ann.get("/api/me/views").json() == []
            assert {v["name"]: v["assigned_to"] for v in viewer.get("/api/views").json()} == {
                "alarms": None, "wifi failures": "curator-2"}
            change = viewer.get("/api/audit", params={"target_id": view["view_id"]}).json()[0]
            assert (change["action"], change["who"]) == ("view.assign", "curator-1")
            assert (change["before"]["assigned_to"], change["after"]["assigned_to"]) == (None, "curator-2")
            assert change["before"]["filters"] == change["after"]["filters"]  # only the assignee changed

            stranger = ann.put(url, json={"assigned_to": "nobody"})
            assert stranger.status_code == 422
            assert "'nobody' is not a user of this lake" in error_of(stranger)["message"]
            assert "curator-2" in error_of(stranger)["message"]  # and says who is
            to_viewer = ann.put(url, json={"assigned_to": "viewer-1"})
            assert to_viewer.status_code == 422 and "'viewer-1' is a viewer and cannot curate" in error_of(to_viewer)["message"]
            for refused in (viewer.put(url, json={"assigned_to": "viewer-1"}), viewer.delete(url)):
                assert refused.status_code == 403 and "curator role" in error_of(refused)["message"]
            assert bo.get(f"/api/views/{view['view_id']}").json()["assigned_to"] == "curator-2"  # unchanged
            missing = ann.put("/api/views/view-nope/assignee", json={"assigned_to": "curator-2"})
            assert missing.status_code == 404 and "view-nope" in error_of(missing)["message"]

            unassigned = bo.delete(url)
            assert unassigned.status_code == 200 and unassigned.json()["assigned_to"] is None
            assert bo.get("/api/me/views").json() == []
            latest = viewer.get("/api/audit", params={"target_id": view["view_id"]}).json()[0]
            assert (latest["action"], latest["who"], latest["after"]["assigned_to"]) == ("view.unassign", "curator-2", None)


def test_without_users_a_view_is_assigned_to_any_name_and_nobody_is_me(client):
    view = client.post("/api/views", json={"name": "for bo", "filters": {"task": "wifi_on"}}).json()
    r = client.put(f"/api/views/{view['view_id']}/assignee", json={"assigned_to": "bo"})
    assert r.status_code == 200 and r.json()["assigned_to"] == "bo"
    assert client.get("/api/me/views").json() == []  # nobody signs in on a server without users
    empty = client.put(f"/api/views/{view['view_id']}/assignee", json={"assigned_to": ""})
    assert empty.status_code == 422 and "assigned_to" in error_of(empty)["message"]
    client.delete(f"/api/views/{view['view_id']}")


# live ------------------------------------------------------------------------------------
def record(lake: Lake, episode_id: str, *, finish: bool = True) -> None:
    with Recorder(lake, run_id="run-live", env="sim") as rec:
        ep = rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id=episode_id, created_at=datetime.now(UTC))
        ep.log_step(screen(0, 0), format_tool_call({"action": "click", "coordinate": [1, 2]}, "go"))
        if finish:
            ep.finish(success=True, eval_score=1.0)


def test_episode_list_answers_304_until_the_lake_changes(tmp_path):
    lake = build_lake(tmp_path / "live")
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            first = c.get("/api/episodes", params={"limit": 1})
            etag = first.headers["etag"]
            assert etag.startswith('W/"') and first.headers["cache-control"] == "no-cache"
            same = c.get("/api/episodes", params={"limit": 1}, headers={"If-None-Match": etag})
            assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == etag

            record(lake, "live-1")
            changed = c.get("/api/episodes", params={"limit": 1}, headers={"If-None-Match": etag})
            assert changed.status_code == 200 and changed.headers["etag"] != etag
            assert changed.json()["items"][0]["episode_id"] == "live-1"
            # a curation write changes what a set filter selects: the ETag follows it too
            etag = changed.headers["etag"]
            c.post("/api/sets", json={"name": "s", "kind": "failure"})
            assert c.get("/api/episodes", headers={"If-None-Match": etag}).status_code == 200

            # the queue keeps its order across NULL sort values (an episode still running)
            record(lake, "live-2", finish=False)
            listed = [e["episode_id"] for e in c.get("/api/episodes", params={"sort": "finished_at", "limit": 500}).json()["items"]]
            assert listed[-1] == "live-2"
            walked, at = [], listed[0]
            while at is not None:
                walked.append(at)
                at = c.get(f"/api/episodes/{at}/queue", params={"sort": "finished_at"}).json()["next"]
            assert walked == listed
            assert c.get("/api/episodes/live-2/queue", params={"sort": "finished_at"}).json()["previous"] == listed[-2]
