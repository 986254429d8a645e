"""What the web app's daily use needs from the API: thumbnails generated once and cached,
SQL results as CSV or Parquet downloads, a set's `updated_at` following its members, and a
bad `where` filter answered in the words the user typed."""

from __future__ import annotations

import csv
import hashlib
import io
import time

import pyarrow.parquet as pq
from PIL import Image

from episodelake.lake.storage import layout
from tests.api.webapp_support import error_of


def test_thumbnail_is_generated_once_and_cached_on_disk(client, lake):
    url = "/api/episodes/set_alarm-1/steps/2/image"
    original, _ = lake.image("set_alarm-1", 2)
    cached = layout.thumbnail_path(lake.path, hashlib.sha256(original).hexdigest(), 96)
    assert not cached.exists()
    r = client.get(url, params={"max_side": 96})
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    assert max(Image.open(io.BytesIO(r.content)).size) == 96
    assert cached.read_bytes() == r.content  # written once, under the lake's cache folder
    stamp = cached.stat().st_mtime_ns
    time.sleep(0.01)
    again = client.get(url, params={"max_side": 96})
    assert again.content == r.content and cached.stat().st_mtime_ns == stamp  # served, not regenerated
    # the same screenshot in another episode shares the cached thumbnail (keyed by content)
    other = client.get("/api/episodes/set_alarm-0/steps/2/image", params={"max_side": 96})
    assert other.content == r.content


def test_thumbnail_of_a_missing_screenshot_is_an_error_not_a_placeholder(client):
    r = client.get("/api/episodes/send_message-2/steps/2/image", params={"max_side": 96})
    assert r.status_code == 404 and r.headers["content-type"] == "application/json"
    assert "no screenshot" in error_of(r)["message"]


QUERY = ("select range as i, case when range % 3 = 0 then null else 'x, \"quoted\"' end as t, "
         "[range, 1] as l from range(2050)")


def test_sql_download_as_csv_and_parquet(client):
    r = client.get("/api/sql/download", params={"query": QUERY, "format": "csv"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert 'attachment; filename="query.csv"' in r.headers["content-disposition"]
    rows = list(csv.reader(io.StringIO(r.text)))
    assert rows[0] == ["i", "t", "l"] and len(rows) == 2051
    assert rows[1] == ["0", "", "[0, 1]"] and rows[2] == ["1", 'x, "quoted"', "[1, 1]"]
    assert r.headers["x-elake-truncated"] == "no"

    r = client.get("/api/sql/download", params={"query": QUERY, "format": "parquet"})
    assert r.status_code == 200 and r.content[:4] == b"PAR1"
    table = pq.read_table(io.BytesIO(r.content))
    assert table.num_rows == 2050 and table.column_names == ["i", "t", "l"]
    assert table.column("l")[5].as_py() == [5, 1]


def test_sql_download_refuses_what_the_console_refuses(client):
    r = client.get("/api/sql/download", params={"query": "drop table steps", "format": "csv"})
    assert r.status_code == 400 and error_of(r)["type"] == "SqlRefused"
    r = client.get("/api/sql/download", params={"query": "select 1", "format": "xlsx"})
    assert r.status_code == 422 and "format" in error_of(r)["message"]


def test_sql_download_says_when_a_cap_cut_it(client, server):
    r = client.get("/api/sql/download", params={"query": "select * from range(20000)", "format": "csv"})
    assert r.status_code == 200 and r.headers["x-elake-truncated"] == "rows"
    assert len(r.text.splitlines()) == 10_001


def test_a_sets_updated_time_follows_its_members(client):
    sid = client.post("/api/sets", json={"name": "followed", "kind": "failure"}).json()["set_id"]
    created = client.get(f"/api/sets/{sid}").json()["updated_at"]
    time.sleep(0.01)
    client.put(f"/api/sets/{sid}/members/wifi_on-1", json={"failure_category": "planning"})
    added = client.get(f"/api/sets/{sid}").json()["updated_at"]
    assert added > created
    time.sleep(0.01)
    client.delete(f"/api/sets/{sid}/members/wifi_on-1")
    removed = client.get(f"/api/sets/{sid}").json()["updated_at"]
    assert removed > added
    assert next(s for s in client.get("/api/sets").json() if s["set_id"] == sid)["updated_at"] == removed


def test_a_bad_where_filter_is_named_in_the_users_words(client):
    r = client.get("/api/tasks", params={"where": "episode_reward >"})
    assert r.status_code == 400
    message = error_of(r)["message"]
    assert message.startswith("where 'episode_reward >'") and '")"' not in message, message
    r = client.get("/api/episodes", params={"where": "no_such_column = 1"})
    assert error_of(r)["message"].startswith("where 'no_such_column = 1'")


def test_a_result_parquet_cannot_hold_is_refused_naming_the_format(client):
    r = client.get("/api/sql/download", params={"query": "select {} as empty", "format": "parquet"})
    assert r.status_code == 422 and error_of(r)["message"].startswith("format: Parquet cannot hold"), r.text
    assert client.get("/api/sql/download", params={"query": "select {} as empty", "format": "csv"}).text == "empty\n{}\n"


def test_overview_summarises_the_lake(client):
    sid = client.post("/api/sets", json={"name": "overview-set", "kind": "failure"}).json()["set_id"]
    client.put(f"/api/sets/{sid}/members/set_alarm-1", json={"failure_category": "perception"})
    client.put(f"/api/sets/{sid}/members/wifi_on-1", json={"failure_category": "perception"})
    client.put(f"/api/sets/{sid}/members/wifi_on-2", json={})
    r = client.get("/api/overview")
    assert r.status_code == 200, r.text
    o = r.json()
    assert o["episodes"] == 9 and o["steps"] == 45
    # every test episode of policy 20 failed, the others succeeded (build_lake)
    assert [(p["policy_version"], p["episodes"], p["successes"]) for p in o["success_by_policy"]] == [
        ("10", 3, 3), ("20", 3, 0), ("30", 3, 3)]
    assert o["latest_runs"][0]["run_id"] == "run-1" and o["latest_runs"][0]["policy_versions"] == ["10", "20", "30"]
    perception = next(c for c in o["failure_categories"] if c["failure_category"] == "perception")
    assert perception["members"] >= 2 and o["failure_categories"][0]["members"] >= perception["members"]
    assert o["recent_sets"][0]["set_id"] == sid  # changed last
    assert client.get("/api/overview", params={"limit": 0}).status_code == 422
