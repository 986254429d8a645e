"""The read side of the API over a real server and a recorded lake: tasks, episodes, steps,
images, stats, groups, and the one error shape."""

from __future__ import annotations

import io
import math

import httpx
import pytest
from PIL import Image

from episodelake.api.listing import EpisodeFilter, list_episodes
from episodelake.api.models import ActionView
from episodelake.api.settings import Settings
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake
from episodelake.lake.vocab.families import format_tool_call
from episodelake.lake.vocab.overlay import RED, draw_action
from tests.api.webapp_support import TASKS, ServerThread, error_of, screen


def test_health_names_the_lake(client, lake):
    body = client.get("/api/health").json()
    # a server that needs no token is its owner's: it says where the lake lives
    assert body["ok"] and body["lake"] == lake.path.name and body["location"] == str(lake.path)
    assert body["tables"] == {"episodes": 9, "steps": 45, "sets": 0}


def test_tasks_have_counts_and_success_rates(client):
    tasks = {t["task_name"]: t for t in client.get("/api/tasks").json()}
    assert set(tasks) == set(TASKS)
    wifi = tasks["wifi_on"]
    assert (wifi["episodes"], wifi["successes"], wifi["failures"], wifi["unjudged"]) == (3, 2, 1, 0)
    assert abs(wifi["success_rate"] - 2 / 3) < 1e-9
    assert wifi["task_goal"] == "Turn on Wi-Fi"


def test_tasks_follow_the_filter(client):
    tasks = client.get("/api/tasks", params={"success": "false"}).json()
    assert all(t["episodes"] == 1 and t["failures"] == 1 for t in tasks)


def ids(page: dict) -> list[str]:
    return [e["episode_id"] for e in page["items"]]


def test_episode_filters(client):
    get = lambda **q: ids(client.get("/api/episodes", params=q).json())  # noqa: E731
    assert sorted(get(task="wifi_on")) == ["wifi_on-0", "wifi_on-1", "wifi_on-2"]
    assert sorted(get(success="false")) == ["send_message-1", "set_alarm-1", "wifi_on-1"]
    assert sorted(get(zero_step_reward="true")) == sorted(get(success="false"))
    assert sorted(get(policy_version="30", task="set_alarm")) == ["set_alarm-2"]
    assert sorted(get(tag="smoke")) == ["send_message-0", "set_alarm-0", "wifi_on-0"]
    assert sorted(get(min_length=6)) == ["send_message-2", "set_alarm-2", "wifi_on-2"]
    assert sorted(get(max_length=4)) == ["send_message-0", "set_alarm-0", "wifi_on-0"]
    assert sorted(get(group_id="g-wifi_on", env="sim", run_id="run-1")) == ["wifi_on-0", "wifi_on-1", "wifi_on-2"]
    assert get(env="adb") == []
    assert sorted(get(where="episode_length = 5 AND task_name LIKE 'wifi%'")) == ["wifi_on-1"]


#: One narrowing value per filter field (a new field needs one here: the test checks that).
FILTER_CASES = {
    "task": "wifi_on", "success": False, "unjudged": True, "run_id": "no-such-run",
    "policy_version": "30", "group_id": "g-wifi_on", "env": "adb", "tag": "smoke",
    "set_id": "no-such-set", "zero_step_reward": True, "min_length": 6, "max_length": 4,
    "where": "episode_length = 5", "search": "alarm",
}


def test_each_filter_field_round_trips(client, lake):
    """Each field of `EpisodeFilter`, sent as its query parameter, selects what the same
    filter selects in Python, and narrows the selection."""
    assert set(FILTER_CASES) == set(EpisodeFilter.model_fields)
    everything = sorted(ids(client.get("/api/episodes").json()))
    for name, value in FILTER_CASES.items():
        filt = EpisodeFilter(**{name: value})
        assert EpisodeFilter.model_validate({name: str(value).lower() if isinstance(value, bool)
                                             else str(value)}) == filt
        rows, _, total = list_episodes(lake, filt, sort="episode_id", descending=False, limit=100,
                                       cursor=None, timeout_s=30)
        wanted = [r["episode_id"] for r in rows]
        page = client.get("/api/episodes", params={name: value, "sort": "episode_id",
                                                   "order": "asc"}).json()
        assert ids(page) == wanted and page["total"] == total == len(wanted), name
        assert wanted != everything, name
        tasks = client.get("/api/tasks", params={name: value}).json()
        assert sum(t["episodes"] for t in tasks) == total, name
        assert client.get("/api/stats", params={name: value}).json()["episodes"] == total, name


def test_the_filters_query_parameters_are_the_model(client):
    """Every route that takes the filter documents its fields as the model states them."""
    doc = client.get("/openapi.json").json()
    for path in ("/api/episodes", "/api/tasks", "/api/stats", "/api/groups"):
        params = {p["name"]: p for p in doc["paths"][path]["get"]["parameters"]}
        for name, field in EpisodeFilter.model_fields.items():
            assert params[name]["description"] == field.description, (path, name)
    params = {p["name"]: p for p in doc["paths"]["/api/episodes"]["get"]["parameters"]}
    assert params["min_length"]["schema"]["anyOf"][0]["maximum"] == 1_000_000
    assert params["where"]["schema"]["anyOf"][0]["maxLength"] == 4000


def test_a_bad_filter_value_is_named(client):
    for query, field in ((("set_id", "../x"),), "set_id"), ((("max_length", "-1"),), "max_length"):
        r = client.get("/api/episodes", params=dict(query))
        assert r.status_code == 422 and error_of(r)["message"].startswith(field), r.text
    with pytest.raises(InvalidInput, match="set_id '../x' is not a valid id"):
        EpisodeFilter(set_id="../x")


def test_where_fragment_goes_through_the_sandbox(client):
    for bad in ("1=1; DROP TABLE episodes", "episode_id IN (SELECT * FROM read_csv('/etc/passwd'))",
                "nonexistent_column = 1"):
        r = client.get("/api/episodes", params={"where": bad})
        assert r.status_code in (400, 422), bad
        assert "where" in error_of(r)["message"] or error_of(r)["type"] == "SqlRefused"


def test_cursor_pagination_visits_every_episode_once_in_order(client):
    for sort, order in (("created_at", "desc"), ("episode_length", "asc"), ("task_name", "desc"),
                        ("eval_score", "asc")):
        seen, cursor, first = [], None, None
        while True:
            params = {"limit": 2, "sort": sort, "order": order, **({"cursor": cursor} if cursor else {})}
            page = client.get("/api/episodes", params=params).json()
            first = first if first is not None else page
            seen += page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert first["total"] == 9 and len(seen) == 9
        assert len({e["episode_id"] for e in seen}) == 9
        keys = [(e[sort], e["episode_id"]) for e in seen]
        assert keys == sorted(keys, reverse=order == "desc"), sort


def test_bad_cursor_and_sort_are_named(client):
    r = client.get("/api/episodes", params={"cursor": "not-a-cursor"})
    assert r.status_code == 422 and "cursor" in error_of(r)["message"]
    r = client.get("/api/episodes", params={"sort": "image"})
    assert r.status_code == 422 and "sort" in error_of(r)["message"]
    r = client.get("/api/episodes", params={"limit": 100000})
    assert r.status_code == 422 and "limit" in error_of(r)["message"]


def test_episode_detail_has_steps_without_image_bytes(client):
    d = client.get("/api/episodes/wifi_on-0").json()
    assert d["episode"]["task_name"] == "wifi_on" and d["episode"]["success"] is True
    assert [s["step"] for s in d["steps"]] == [0, 1, 2, 3]
    first = d["steps"][0]
    assert "image" not in first and "prompt" not in first
    assert first["image_url"] == "/api/episodes/wifi_on-0/steps/0/image"
    assert first["action_type"] == "click" and first["action"]["coordinate"] == [500, 300]
    assert 0 <= first["x"] <= 1 and 0 <= first["y"] <= 1
    assert d["steps"][-1]["action_type"] == "terminate"
    assert d["memberships"] == [] and d["annotations"] == []


def test_model_text_is_returned_verbatim_as_data(client):
    step = client.get("/api/episodes/wifi_on-0").json()["steps"][1]
    assert "<script>" in step["thinking"]  # stored as given; the web app renders it as text


def test_step_detail_has_the_prompt(client):
    step = client.get("/api/episodes/wifi_on-0/steps/2").json()
    assert step["action_type"] == "swipe" and step["action"]["direction"] == "up"
    assert '"content": "Turn on Wi-Fi"' in step["prompt"]


def test_image_is_the_stored_bytes(client):
    r = client.get("/api/episodes/set_alarm-0/steps/1/image")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    assert r.content == screen(1, 1)
    assert "max-age" in r.headers["cache-control"]


def test_annotated_image_draws_the_action(client):
    plain = Image.open(io.BytesIO(client.get("/api/episodes/wifi_on-0/steps/0/image").content)).convert("RGB")
    r = client.get("/api/episodes/wifi_on-0/steps/0/image", params={"annotated": 1})
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    drawn = Image.open(io.BytesIO(r.content)).convert("RGB")
    assert drawn.size == plain.size
    x, y = round(500 / 999 * drawn.width), round(300 / 999 * drawn.height)
    assert drawn.getpixel((x, y))[0] > 200 and plain.getpixel((x, y)) != drawn.getpixel((x, y))


def test_annotated_image_draws_the_description_the_api_sends(client, lake):
    """Both renderers read one object: drawing a step's `action_view` from the JSON gives the
    annotated endpoint's bytes, for every step with a screenshot (every action type)."""
    kinds = set()
    for episode_id in ("wifi_on-2", "set_alarm-2", "send_message-2"):
        for step in client.get(f"/api/episodes/{episode_id}").json()["steps"]:
            if step["image_url"] is None:
                continue
            view = ActionView.model_validate(step["action_view"])
            assert client.get(f"/api/episodes/{episode_id}/steps/{step['step']}").json()["action_view"] == step["action_view"]
            raw, _ = lake.image(episode_id, step["step"])
            annotated = client.get(step["image_url"], params={"annotated": 1}).content
            assert annotated == draw_action(raw, view), (episode_id, step["step"])
            kinds.add(view.marker.kind)
    assert kinds == {"click", "long_press", "swipe", "drag", "none"}


def test_the_annotated_click_is_ringed_in_white_on_a_red_screen(tmp_path):
    """A click on a red icon: the red marker shows by its white outline (the web app's
    overlay got one first)."""
    lake = Lake(tmp_path / "red")
    red_screen = io.BytesIO()
    Image.new("RGB", (540, 1080), (200, 0, 0)).save(red_screen, "PNG")
    with Recorder(lake, run_id="run-red", env="sim") as rec:
        ep = rec.start_episode("tap_red", "Tap the red icon", episode_id="red-0")
        ep.log_step(red_screen.getvalue(), format_tool_call({"action": "click", "coordinate": [500, 500]}, "tap"))
        ep.finish(success=True)
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        r = httpx.get(f"{srv.url}/api/episodes/red-0/steps/0/image", params={"annotated": 1}, timeout=30)
    drawn = Image.open(io.BytesIO(r.content)).convert("RGB")
    at = (270, 540)  # the click's point; a unit of 10 px: dot 5, ring 8-10, outline 2 px
    assert drawn.getpixel(at) == RED
    for r_px in (11, 6.5):  # just outside the ring; between the dot and the ring
        ring = [(round(at[0] + r_px * math.cos(math.radians(a))), round(at[1] + r_px * math.sin(math.radians(a))))
                for a in range(23, 360, 45)]  # off the cross-hair's axes
        assert [drawn.getpixel(p) for p in ring] == [(255, 255, 255)] * 8, r_px
    assert drawn.getpixel((20, 1000)) == (200, 0, 0)


def test_steps_carry_their_action_view(client):
    steps = client.get("/api/episodes/wifi_on-2").json()["steps"]
    drag = steps[3]["action_view"]
    assert drag["summary"] == "drag (100, 200) -> (800, 900)" and drag["badge"] is None
    assert drag["marker"] == {"kind": "drag", "points": [{"x": steps[3]["x"], "y": steps[3]["y"]},
                                                         {"x": steps[3]["x2"], "y": steps[3]["y2"]}]}
    assert steps[4]["action_view"]["badge"] == "text" and steps[4]["action_view"]["marker"]["kind"] == "none"
    assert steps[-1]["action_view"] == {"summary": "terminate success", "badge": "finish",
                                        "marker": {"kind": "none", "points": []}}


def test_thumbnails_are_small_jpegs(client):
    r = client.get("/api/episodes/wifi_on-0/steps/0/image", params={"max_side": 120})
    assert r.headers["content-type"] == "image/jpeg"
    assert max(Image.open(io.BytesIO(r.content)).size) == 120
    r = client.get("/api/episodes/wifi_on-0/steps/0/image", params={"max_side": 120, "annotated": 1})
    assert r.headers["content-type"] == "image/jpeg"


def test_missing_things_are_404_in_the_error_shape(client):
    cases = {
        "/api/episodes/nope": "nope",
        "/api/episodes/wifi_on-0/steps/99": "no step 99",
        "/api/episodes/nope/steps/0/image": "nope",
        "/api/episodes/send_message-2/steps/2/image": "no screenshot",
        "/api/groups/g-nope": "g-nope",
        "/api/sets/set-nope": "set-nope",
        "/api/no/such/route": "no API route",
    }
    for url, words in cases.items():
        r = client.get(url)
        assert r.status_code == 404, url
        assert words in error_of(r)["message"], url


def test_step_without_screenshot_keeps_the_episode_viewable(client):
    d = client.get("/api/episodes/send_message-2").json()
    assert d["steps"][2]["image_url"] is None and d["steps"][3]["image_url"]


def test_stats(client):
    s = client.get("/api/stats").json()
    assert s["episodes"] == 9 and s["steps"] == 45 and s["step_reward_nulls"] == 0
    cell = next(c for c in s["success_by_task_policy"] if c["task_name"] == "wifi_on" and c["policy_version"] == "20")
    assert (cell["episodes"], cell["successes"], cell["success_rate"]) == (1, 0, 0.0)
    assert sum(b["count"] for b in s["step_reward_histogram"]) == 45
    zero_bin = s["step_reward_histogram"][0]
    assert zero_bin["lo"] == 0.0 and zero_bin["count"] == 3
    lengths = {b["lo"]: b["count"] for b in s["length_histogram"]}
    assert lengths == {4.0: 3, 5.0: 3, 6.0: 3}
    assert client.get("/api/stats", params={"task": "wifi_on"}).json()["episodes"] == 3


def test_groups_list_and_anchor_groups(client):
    groups = {g["group_id"]: g for g in client.get("/api/groups").json()}
    assert set(groups) == {f"g-{t}" for t in TASKS} and groups["g-wifi_on"]["episodes"] == 3
    g = client.get("/api/groups/g-wifi_on").json()
    assert [e["episode_id"] for e in g["episodes"]] == ["wifi_on-0", "wifi_on-1", "wifi_on-2"]
    shared = [a for a in g["anchors"] if a["episodes"] == 3]
    # steps 0-3 show the same screen in all three episodes (the last steps differ in index)
    assert len(shared) >= 3
    assert sum(len(a["steps"]) for a in g["anchors"]) + g["unanchored_steps"] == 15
    step = shared[0]["steps"][0]
    assert step["image_url"].startswith("/api/episodes/") and step["discounted_return"] is not None
    assert all(s["advantage"] is not None for a in g["anchors"] for s in a["steps"])
    assert "trainer's defaults" in g["advantages_note"]


def test_group_gamma_the_trainer_refuses_is_named(client):
    """A gamma whose powers underflow over these episodes is refused, as the trainer would."""
    r = client.get("/api/groups/g-wifi_on", params={"gamma": 1e-300})
    assert r.status_code == 422 and error_of(r)["message"].startswith("gamma:")


def test_validation_errors_name_the_field(client):
    r = client.get("/api/episodes/wifi_on-0/steps/-1")
    assert r.status_code == 422 and "step" in error_of(r)["message"]
    r = client.get("/api/episodes", params={"min_length": "many"})
    assert r.status_code == 422 and "min_length" in error_of(r)["message"]
