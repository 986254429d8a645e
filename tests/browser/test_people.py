"""People in the web app (headless Chromium): on a lake with users the app asks for a token,
shows who is signed in, a viewer reads every page and is refused changes with a message that
says why, a curator's changes are recorded under their name in the audit log and on the
set's page, and a saved view assigned to a curator is their queue."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from episodelake.api.settings import Settings, default_static_dir
from episodelake.lake.curation import curation
from episodelake.lake.ops import users
from tests.api.webapp_support import ServerThread, build_lake
from tests.browser.conftest import axe_violations, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def people_lake(tmp_path_factory):
    lake = build_lake(tmp_path_factory.mktemp("people-browser") / "lake")
    lake.tokens = {role: users.add(lake, f"{role}-ann", role, by="test")[1]  # type: ignore[attr-defined]
                   for role in ("viewer", "curator")}
    lake.tokens["bo"] = users.add(lake, "curator-bo", "curator", by="test")[1]  # type: ignore[attr-defined]
    return lake


@pytest.fixture(scope="module")
def people_server(people_lake):
    with ServerThread(Settings(lake=people_lake.path, static_dir=default_static_dir()), people_lake) as srv:
        yield srv


@pytest.fixture
def fresh(browser):
    """A page in a context of its own: no cookie from another person's test."""
    context = browser.browser.new_context(viewport={"width": 1400, "height": 900}) if browser.browser else None
    page = context.new_page() if context else browser.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    page.close()
    if context:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def sign_in(page, server, token: str) -> None:
    page.context.clear_cookies()
    page.goto(server.url + "/")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_test_id("signed-in").wait_for()


def test_the_app_asks_for_a_token_and_refuses_a_wrong_one(fresh, people_server):
    fresh.context.clear_cookies()
    fresh.goto(people_server.url + "/episodes/wifi_on-0/steps/0")
    assert fresh.get_by_role("heading", name="EpisodeLake").is_visible()
    fresh.get_by_label("Token").fill("elk_not-a-token")
    fresh.get_by_role("button", name="Sign in").click()
    fresh.get_by_text("That token is not (or no longer) valid.").wait_for()
    assert axe_violations(fresh) == []


def test_a_viewer_reads_every_page_and_is_told_who_may_change_things(fresh, people_server, people_lake):
    sign_in(fresh, people_server, people_lake.tokens["viewer"])
    assert fresh.get_by_test_id("signed-in").inner_text().startswith("viewer-ann (viewer)")
    for path, testid in [("/episodes/wifi_on-0/steps/0", "screen"), ("/sets", "sets-page"), ("/sql", "sql-page")]:
        fresh.goto(people_server.url + path)
        fresh.get_by_test_id(testid).wait_for()
    # the replay offers no curation or edits to a viewer, and says who may
    fresh.goto(people_server.url + "/episodes/wifi_on-0/steps/0")
    note = fresh.get_by_test_id("role-note")
    note.wait_for()
    assert "Curating episodes needs the curator role" in note.inner_text() and "viewer-ann (viewer)" in note.inner_text()
    assert fresh.get_by_test_id("curation").count() == 0 and fresh.get_by_label("New failure set name").count() == 0
    assert fresh.get_by_text("Edit episode").count() == 0
    fresh.goto(people_server.url + "/?task=wifi_on")
    fresh.get_by_test_id("task-tree").wait_for()
    assert fresh.get_by_test_id("bulk-add").count() == 0
    fresh.get_by_test_id("task-tree").get_by_role("button", name=re.compile("wifi_on")).click()
    fresh.get_by_test_id("task-tree").locator("[data-episode]").first.wait_for()
    assert fresh.get_by_test_id("task-tree").locator("input.tick").count() == 0  # nothing to tick for
    fresh.goto(people_server.url + "/sets")
    assert "Making sets needs the curator role" in fresh.get_by_test_id("role-note").inner_text()
    assert fresh.get_by_role("button", name="Create set").count() == 0
    shot(fresh, "people-viewer")
    assert axe_violations(fresh) == []
    # and the server refuses what the app no longer offers
    r = fresh.request.post(people_server.url + "/api/sets", data={"name": "viewer's set"},
                           headers={"Origin": people_server.url})
    assert r.status == 403 and "viewer-ann is a viewer" in r.json()["error"]["message"]
    people_lake.invalidate()
    assert people_lake.sql("select count(*) n from sets where name = 'viewer''s set'").to_pylist()[0]["n"] == 0
    fresh.get_by_test_id("signed-in").get_by_role("button", name="Sign out").click()
    fresh.get_by_label("Token").wait_for()


def test_a_curators_changes_are_recorded_under_their_name(fresh, people_server, people_lake):
    sign_in(fresh, people_server, people_lake.tokens["curator"])
    fresh.goto(people_server.url + "/episodes/wifi_on-1/steps/1")
    fresh.get_by_test_id("screen").wait_for()
    fresh.get_by_label("New failure set name").fill("ann's failures")
    fresh.get_by_role("button", name="Create").click()
    fresh.get_by_test_id("curation-target").get_by_text("ann's failures").wait_for()
    fresh.get_by_test_id("note").fill("misses the toggle")
    fresh.locator("body").click(position={"x": 5, "y": 300})
    fresh.keyboard.press("1")
    fresh.get_by_test_id("toast").get_by_text(re.compile("Saved in ann's failures")).wait_for()
    people_lake.invalidate()
    trail = people_lake.sql("select who, action from audit where who = 'curator-ann' "
                            "order by changed_at").to_pylist()
    assert [t["action"] for t in trail] == ["set.create", "member.put"]
    member = people_lake.sql("select added_by from set_members where episode_id = 'wifi_on-1'").to_pylist()
    assert member == [{"added_by": "curator-ann"}]
    set_id = people_lake.sql("select set_id from sets where name = 'ann''s failures'").to_pylist()[0]["set_id"]
    fresh.goto(f"{people_server.url}/sets/{set_id}")
    fresh.get_by_text("made by curator-ann").wait_for()
    changes = fresh.get_by_test_id("set-changes")
    changes.get_by_text("member.put").wait_for()
    assert changes.get_by_text("curator-ann").count() == 2
    fresh.get_by_test_id("members").get_by_text("by curator-ann").wait_for()  # the members load after the set
    shot(fresh, "people-curator-set")
    assert axe_violations(fresh) == []


def test_a_curator_files_every_matching_episode_at_once(fresh, people_server, people_lake):
    sign_in(fresh, people_server, people_lake.tokens["curator"])
    made = people_lake.sql("select set_id from sets where name = 'ann''s failures'").to_pylist()
    set_id = made[0]["set_id"] if made else None
    if set_id is None:  # this test alone: the set the test before makes
        set_id = curation.create_set(people_lake, "ann's failures", who="curator-ann")["set_id"]
    fresh.goto(people_server.url + "/")
    assert fresh.get_by_test_id("bulk-add").count() == 0  # nothing filters: no "add everything"
    fresh.goto(people_server.url + "/?task=set_alarm")
    bulk = fresh.get_by_test_id("bulk-add")
    bulk.get_by_text("3 matching").wait_for()
    bulk.get_by_label("set to add the matching episodes to").select_option(set_id)
    bulk.get_by_role("button", name="Add").click()
    fresh.get_by_role("dialog").get_by_role("button", name="Add 3").click()
    fresh.get_by_test_id("toast").get_by_text(re.compile("Added 3 to ann's failures")).wait_for()
    people_lake.invalidate()
    filed = people_lake.sql(f"select episode_id, added_by from set_members where set_id = '{set_id}' "
                            "and episode_id like 'set_alarm-%' order by episode_id").to_pylist()
    assert filed == [{"episode_id": f"set_alarm-{i}", "added_by": "curator-ann"} for i in range(3)]
    assert axe_violations(fresh) == []


def test_a_curator_ticks_a_range_of_episodes_and_files_exactly_those(fresh, people_server, people_lake):
    sign_in(fresh, people_server, people_lake.tokens["curator"])
    set_id = curation.create_set(people_lake, "ann's picks", who="curator-ann")["set_id"]
    fresh.set_viewport_size({"width": 1280, "height": 800})
    fresh.goto(people_server.url + "/")
    tree = fresh.get_by_test_id("task-tree")
    for task in ("send_message", "set_alarm"):  # two tasks open: a range runs on across them
        tree.get_by_role("button", name=re.compile(task)).click()
    boxes = tree.locator("input.tick")
    expect(boxes).to_have_count(6)
    shown = [b.get_attribute("data-tick") for b in boxes.all()]
    boxes.nth(1).click()
    boxes.nth(4).click(modifiers=["Shift"])  # 3 rows down: 4 ticked, into the second task
    bar = fresh.get_by_test_id("selection-bar")
    expect(bar.get_by_text("4 selected")).to_be_visible()
    assert [b.is_checked() for b in boxes.all()] == [False, True, True, True, True, False]
    tree.get_by_role("button", name=re.compile("set_alarm")).click()  # two ticked rows go out of sight
    expect(bar.get_by_test_id("ticked-hidden")).to_have_text("(2 not shown)")
    tree.get_by_role("button", name=re.compile("set_alarm")).click()
    expect(bar.get_by_test_id("ticked-hidden")).to_have_count(0)
    expect(boxes).to_have_count(6)
    shot(fresh, "ticked-1280")
    assert axe_violations(fresh) == []
    fresh.set_viewport_size({"width": 390, "height": 844})
    expect(bar).to_be_visible()
    shot(fresh, "ticked-390")
    assert axe_violations(fresh) == []

    bar.get_by_label("set to add the selected episodes to").select_option(label="ann's picks")
    bar.get_by_role("button", name="Add").click()
    fresh.get_by_role("dialog").get_by_role("button", name="Add 4").click()
    fresh.get_by_test_id("toast").get_by_text(re.compile("Added 4 to ann's picks")).wait_for()
    expect(bar).to_have_count(0)  # filed: the ticks are cleared
    members = fresh.request.get(f"{people_server.url}/api/sets/{set_id}/members").json()
    assert sorted(m["episode_id"] for m in members) == sorted(shown[1:5])
    people_lake.invalidate()
    filed = people_lake.sql(f"select distinct added_by from set_members where set_id = '{set_id}'").to_pylist()
    assert filed == [{"added_by": "curator-ann"}]
    trail = people_lake.sql(f"select who, episode_id from audit where action = 'member.put' "
                            f"and target_id like '{set_id}/%' order by episode_id").to_pylist()
    assert trail == [{"who": "curator-ann", "episode_id": e} for e in sorted(shown[1:5])]

    # by keyboard: Space ticks, Shift+Space ticks the range, "clear" hands focus back to a box
    boxes.nth(0).focus()
    fresh.keyboard.press("Space")
    boxes.nth(2).focus()
    fresh.keyboard.press("Shift+Space")
    expect(bar.get_by_text("3 selected")).to_be_visible()
    bar.get_by_role("button", name="clear").focus()
    fresh.keyboard.press("Enter")
    expect(bar).to_have_count(0)
    expect(boxes.nth(2)).to_be_focused()


def test_a_curator_ticks_a_sets_members_and_files_them_into_another_set(fresh, people_server, people_lake):
    source = curation.create_set(people_lake, "triage", who="curator-ann")["set_id"]
    target = curation.create_set(people_lake, "hard cases", who="curator-ann")["set_id"]
    for episode in ("set_alarm-0", "set_alarm-1", "set_alarm-2", "wifi_on-0"):
        curation.add_member(people_lake, source, episode, added_by="curator-ann")
    sign_in(fresh, people_server, people_lake.tokens["curator"])
    fresh.goto(f"{people_server.url}/sets/{source}")
    boxes = fresh.get_by_test_id("members").locator("input.tick")
    expect(boxes).to_have_count(4)
    order = [b.get_attribute("data-tick") for b in boxes.all()]
    boxes.nth(0).click()
    boxes.nth(2).click(modifiers=["Shift"])
    bar = fresh.get_by_test_id("selection-bar")
    expect(bar.get_by_text("3 selected")).to_be_visible()
    bar.get_by_label("set to add the selected episodes to").select_option(label="hard cases")
    bar.get_by_role("button", name="Add").click()
    fresh.get_by_role("dialog").get_by_role("button", name="Add 3").click()
    fresh.get_by_test_id("toast").get_by_text(re.compile("Added 3 to hard cases")).wait_for()
    filed = fresh.request.get(f"{people_server.url}/api/sets/{target}/members").json()
    assert sorted(m["episode_id"] for m in filed) == sorted(order[:3])
    assert axe_violations(fresh) == []


def test_a_set_is_assigned_and_two_reviews_are_compared(fresh, people_server, people_lake):
    made = curation.create_set(people_lake, "review me", who="curator-ann")
    for episode in ("send_message-0", "send_message-1"):
        curation.add_member(people_lake, made["set_id"], episode, failure_category="grounding", added_by="curator-ann")
    url = f"{people_server.url}/sets/{made['set_id']}"
    for token, category in ((people_lake.tokens["curator"], "grounding"), (people_lake.tokens["bo"], "planning")):
        sign_in(fresh, people_server, token)
        fresh.goto(url)
        fresh.get_by_label("your review of send_message-0").select_option("grounding")
        fresh.get_by_test_id("toast").get_by_text("Reviewed send_message-0: grounding").wait_for()
        fresh.get_by_label("your review of send_message-1").select_option(category)
        fresh.get_by_test_id("toast").get_by_text(f"Reviewed send_message-1: {category}").wait_for()
    fresh.get_by_label("assigned to").select_option("curator-ann")
    fresh.get_by_role("button", name="Save").click()
    fresh.reload()
    assert fresh.get_by_label("assigned to").input_value() == "curator-ann"
    members = fresh.get_by_test_id("members")
    agreed = members.locator("[data-review-state=agreed]")
    disputed = members.locator("[data-review-state=disputed]")
    agreed.wait_for()
    assert disputed.count() == 1
    text = disputed.inner_text()
    assert "curator-ann: grounding" in text and "curator-bo: planning" in text
    shot(fresh, "people-reviews")
    assert axe_violations(fresh) == []


def test_a_view_assigned_to_a_curator_is_first_and_under_assigned_to_me(fresh, people_server, people_lake):
    queue = curation.create_view(people_lake, "wifi queue", {"task": "wifi_on"}, who="curator-ann")
    curation.create_view(people_lake, "alarms", {"task": "set_alarm"}, who="curator-ann")  # first by name
    sign_in(fresh, people_server, people_lake.tokens["curator"])
    fresh.goto(f"{people_server.url}/views/{queue['view_id']}")
    fresh.wait_for_url(re.compile(rf"view={queue['view_id']}"))
    assignee = fresh.get_by_label("view assigned to")
    expect(assignee.locator("option[value=curator-bo]")).to_have_count(1)
    assert assignee.locator("option[value=viewer-ann]").count() == 0  # a viewer cannot work a queue
    fresh.get_by_label("view assigned to").select_option("curator-bo")
    fresh.get_by_test_id("toast").get_by_text("Assigned “wifi queue” to curator-bo.").wait_for()
    picker = fresh.get_by_label("saved view")
    expect(picker.locator(f"option[value={queue['view_id']}]")).to_have_text("wifi queue (assigned to curator-bo)")
    people_lake.invalidate()
    trail = people_lake.sql(f"select who, action from audit where target_id = '{queue['view_id']}' "
                            "order by changed_at").to_pylist()
    assert [(t["who"], t["action"]) for t in trail] == [("curator-ann", "view.create"), ("curator-ann", "view.assign")]

    sign_in(fresh, people_server, people_lake.tokens["bo"])
    fresh.goto(people_server.url + "/")
    views = fresh.get_by_test_id("saved-views")
    picker = views.get_by_label("saved view")
    # bo's queue before every other view, "alarms" too, though it sorts first by name
    expect(picker.locator("optgroup[label='your queues'] option")).to_have_text(["wifi queue"])
    assert picker.locator("option").all_inner_texts()[1] == "wifi queue"
    assert "alarms" in picker.locator("optgroup[label='other views']").inner_text()
    views.get_by_label("assigned to me").check()
    expect(picker.locator("option")).to_have_text(["saved views…", "wifi queue"])
    fresh.wait_for_url(re.compile(r"mine=1"))  # in the address: a reload keeps it
    fresh.reload()
    expect(views.get_by_label("assigned to me")).to_be_checked()
    expect(picker.locator("option")).to_have_text(["saved views…", "wifi queue"])
    picker.select_option(label="wifi queue")
    fresh.wait_for_url(re.compile(rf"/\?(?=.*task=wifi_on)(?=.*view={queue['view_id']})(?=.*mine=1)"))
    expect(views.get_by_label("view assigned to")).to_have_value("curator-bo")
    shot(fresh, "people-view-queue")
    assert axe_violations(fresh) == []
