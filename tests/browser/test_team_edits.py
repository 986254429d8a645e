"""Two people editing one set, one saved view and one saved query at once, each in a browser of
their own (headless Chromium, two contexts, a real server): every conflict is shown (the
teammate's value beside the field, who saved it and when), what the user typed survives the
teammate's save arriving, and nothing is overwritten unseen (the lake holds what each chose
after merging). A save made before the newer version reached the page is refused (412) and
shown the same way."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from episodelake.api.settings import Settings, default_static_dir
from episodelake.lake.curation import curation, saved_queries
from episodelake.lake.ops import users
from tests.api.webapp_support import ServerThread, build_lake
from tests.browser.conftest import axe_violations, shot, signed_in_pages

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PEOPLE = {"alice": "curator", "bob": "curator", "carol": "admin", "vic": "viewer"}


@pytest.fixture(scope="module")
def team_lake(tmp_path_factory):
    lake = build_lake(tmp_path_factory.mktemp("team-edits") / "lake")
    lake.tokens = {name: users.add(lake, name, role, by="test")[1]  # type: ignore[attr-defined]
                   for name, role in PEOPLE.items()}
    return lake


@pytest.fixture(scope="module")
def team_server(team_lake):
    static = default_static_dir()
    if static is None:
        pytest.fail("the web app is not built: run `just web` (builds web/ into api/static)")
    with ServerThread(Settings(lake=team_lake.path, static_dir=static), team_lake) as srv:
        yield srv


@pytest.fixture
def person(chromium, team_server, team_lake):
    """`person(name)`: a page in a browser context of that person's own, signed in."""
    yield from signed_in_pages(chromium, team_server, team_lake.tokens)


def pause_live(page) -> None:
    """Stop the page's live updates, so a teammate's save reaches it only through its own."""
    live = page.get_by_test_id("live")
    live.click()
    expect(live).to_have_attribute("data-state", "paused")


def stored_set(lake, set_id: str) -> dict:
    lake.invalidate()
    return curation.get_set(lake, set_id)


def test_two_people_edit_one_set_and_the_conflict_is_shown(person, team_server, team_lake):
    made = curation.create_set(team_lake, "triage", description="first words", who="bob")
    url = f"{team_server.url}/sets/{made['set_id']}"
    alice, bob = person("alice"), person("bob")
    for page in (alice, bob):
        page.goto(url)
        expect(page.get_by_label("description", exact=True)).to_have_value("first words")
    # alice is typing when bob saves a new name and description
    alice.get_by_label("description", exact=True).fill("alice's words")
    bob.get_by_label("name", exact=True).fill("triage (bob)")
    bob.get_by_label("description", exact=True).fill("bob's words")
    bob.get_by_role("button", name="Save", exact=True).click()
    bob.get_by_test_id("toast").get_by_text("Saved the set triage (bob)").wait_for()
    # bob's save reaches alice's page (live): her words stay, bob's show beside them
    theirs = alice.get_by_test_id("theirs-description")
    expect(theirs).to_contain_text("bob's words")
    expect(alice.get_by_label("description", exact=True)).to_have_value("alice's words")
    expect(alice.get_by_label("name", exact=True)).to_have_value("triage (bob)")  # a field she left follows
    conflict = alice.get_by_test_id("conflict")
    expect(conflict).to_contain_text("bob saved a newer version of this set (version 2)")
    expect(alice.get_by_role("button", name="Save", exact=True)).to_be_disabled()
    shot(alice, "team-set-conflict")
    assert axe_violations(alice) == []
    # she keeps hers and saves: her description, bob's name
    alice.get_by_role("button", name="keep mine (description)").click()
    expect(conflict).to_have_count(0)
    alice.get_by_role("button", name="Save", exact=True).click()
    alice.get_by_test_id("toast").get_by_text("Saved the set triage (bob)").wait_for()
    stored = stored_set(team_lake, made["set_id"])
    assert (stored["name"], stored["description"], stored["version"]) == ("triage (bob)", "alice's words", 3)
    # bob, who edits nothing now, sees her description arrive; the Changes say before and after
    expect(bob.get_by_label("description", exact=True)).to_have_value("alice's words")
    changes = alice.get_by_test_id("set-changes")
    changes.get_by_text("bob's words").first.wait_for()
    assert "alice's words" in changes.inner_text() and "first words" in changes.inner_text()


def test_a_save_from_an_older_version_is_refused_and_shown(person, team_server, team_lake):
    made = curation.create_set(team_lake, "older", description="v1 words", who="bob")
    alice = person("alice")
    alice.goto(f"{team_server.url}/sets/{made['set_id']}")
    expect(alice.get_by_label("description", exact=True)).to_have_value("v1 words")
    pause_live(alice)  # bob's save does not reach her page before she saves
    curation.update_set(team_lake, made["set_id"], who="bob", description="bob's newer words")
    alice.get_by_label("description", exact=True).fill("alice's older edit")
    alice.get_by_role("button", name="Save", exact=True).click()
    expect(alice.get_by_test_id("set-save-error")).to_contain_text("a teammate saved this set meanwhile")
    expect(alice.get_by_test_id("theirs-description")).to_contain_text("bob's newer words")
    expect(alice.get_by_label("description", exact=True)).to_have_value("alice's older edit")
    expect(alice.get_by_test_id("conflict")).to_contain_text("bob saved")
    assert stored_set(team_lake, made["set_id"])["description"] == "bob's newer words"  # not overwritten
    alice.get_by_role("button", name="take theirs (description)").click()
    expect(alice.get_by_label("description", exact=True)).to_have_value("bob's newer words")
    expect(alice.get_by_role("button", name="Save", exact=True)).to_be_disabled()  # nothing of hers left to save
    assert stored_set(team_lake, made["set_id"])["version"] == 2


def test_two_people_edit_one_view_and_the_conflict_is_shown(person, team_server, team_lake):
    view = curation.create_view(team_lake, "wifi queue", {"task": "wifi_on"}, who="bob")
    alice, bob = person("alice"), person("bob")
    alice.goto(f"{team_server.url}/views/{view['view_id']}")
    alice.wait_for_url(re.compile(rf"view={view['view_id']}"))
    # alice changes the open view's filter (not saved yet): it says "modified"
    alice.goto(f"{team_server.url}/?task=set_alarm&view={view['view_id']}")
    expect(alice.get_by_test_id("view-modified")).to_be_visible()
    # bob saves other filters into the view from his browser
    bob.goto(f"{team_server.url}/?task=send_message&view={view['view_id']}")
    bob.get_by_role("button", name="Update view").click()
    bob.get_by_test_id("toast").get_by_text("Updated the view “wifi queue”.").wait_for()
    # alice's page shows bob's filter beside hers, and keeps hers in the address
    conflict = alice.get_by_test_id("view-conflict")
    expect(conflict.get_by_test_id("theirs-task")).to_have_text("send_message")
    expect(conflict).to_contain_text("bob saved a newer version of this view (version 2)")
    assert "task=set_alarm" in alice.url
    expect(alice.get_by_role("button", name="Update view")).to_be_disabled()
    shot(alice, "team-view-conflict")
    assert axe_violations(alice) == []
    conflict.get_by_role("button", name="keep mine").click()
    alice.get_by_role("button", name="Update view").click()
    alice.get_by_test_id("toast").get_by_text("Updated the view “wifi queue”.").wait_for()
    team_lake.invalidate()
    stored = curation.get_view(team_lake, view["view_id"])
    assert stored["filters"] == {"task": "set_alarm"} and stored["version"] == 3 and stored["changed_by"] == "alice"
    trail = [a["action"] for a in team_lake.sql(f"select action from audit where target_id = '{view['view_id']}' "
                                                "order by changed_at").to_pylist()]
    assert trail == ["view.create", "view.update", "view.update"]


def test_two_people_edit_one_saved_query_and_the_conflict_is_shown(person, team_server, team_lake):
    saved = saved_queries.save(team_lake, "per task", "select task_name, count(*) from episodes group by 1", owner="bob")
    bob, carol = person("bob"), person("carol")  # its owner and an admin may change it
    for page in (bob, carol):
        page.goto(team_server.url + "/sql")
        page.get_by_test_id("sql-saved").get_by_role("button", name="per task", exact=True).click()
        expect(page.get_by_test_id("sql-input")).to_have_value(saved["query"])
    pause_live(carol)
    bob.get_by_test_id("sql-input").fill("select task_name, count(*) n from episodes group by 1 order by n")
    bob.get_by_role("button", name="Save changes to per task").click()
    bob.get_by_test_id("toast").get_by_text("Saved the changes to per task").wait_for()
    # carol saves her own edit from the version she opened: refused, bob's text shown beside hers
    carol.get_by_test_id("sql-input").fill("select count(*) from episodes")
    carol.get_by_role("button", name="Save changes to per task").click()
    carol.get_by_test_id("toast").get_by_text(re.compile("Not saved: someone saved per task meanwhile")).wait_for()
    theirs = carol.get_by_test_id("theirs-query")
    expect(theirs).to_contain_text("order by n")
    expect(carol.get_by_test_id("sql-input")).to_have_value("select count(*) from episodes")
    expect(carol.get_by_test_id("conflict")).to_contain_text("bob saved a newer version of this saved query")
    team_lake.invalidate()
    assert saved_queries.get(team_lake, saved["query_id"])["query"].endswith("order by n")  # bob's stands
    theirs.get_by_role("button", name="keep mine").click()
    carol.get_by_role("button", name="Save changes to per task").click()
    carol.get_by_test_id("toast").get_by_text("Saved the changes to per task").wait_for()
    team_lake.invalidate()
    stored = saved_queries.get(team_lake, saved["query_id"])
    assert (stored["query"], stored["version"], stored["changed_by"]) == ("select count(*) from episodes", 3, "carol")
    # bob typed nothing since: his editor follows carol's save
    expect(bob.get_by_test_id("sql-input")).to_have_value("select count(*) from episodes")
