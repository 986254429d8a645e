"""The team flow's rough edges, in headless Chromium over a real server on a lake with users:
sign-in returns to the page asked for, a wrong token in the address gets the sign-in page, a
viewer is not offered changes (each place says who may), a refusal reads in plain words, the
error toast leaves the note box clear at 1280x800, a review records its own failing step, SQL
history keeps a failed query, episode rows label their policy version, and an admin manages
people on the People page (each change an audit row under their name)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from episodelake.lake.curation import curation
from episodelake.lake.ops import users
from tests.browser.conftest import axe_violations
from tests.browser.test_team_edits import person, team_lake, team_server  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def anonymous(chromium):  # noqa: F811
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def test_sign_in_returns_to_the_page_asked_for(anonymous, team_server, team_lake):  # noqa: F811
    anonymous.goto(f"{team_server.url}/sql?q=select%201")
    anonymous.get_by_label("Token").fill(team_lake.tokens["alice"])
    anonymous.get_by_role("button", name="Sign in").click()
    anonymous.get_by_test_id("sql-page").wait_for()
    assert anonymous.url == f"{team_server.url}/sql?q=select%201"
    expect(anonymous.get_by_test_id("sql-input")).to_have_value("select 1")


def test_a_wrong_token_in_the_address_shows_the_sign_in_page(anonymous, team_server):  # noqa: F811
    anonymous.goto(f"{team_server.url}/?token=elk_not-a-token")
    expect(anonymous.get_by_text("That token is not (or no longer) valid.")).to_be_visible()
    expect(anonymous.get_by_label("Token")).to_be_visible()
    assert "{" not in anonymous.locator("body").inner_text()  # no raw JSON


def test_a_viewer_is_not_offered_changes(person, team_server):  # noqa: F811
    vic = person("vic")
    vic.goto(f"{team_server.url}/episodes/wifi_on-0/steps/1")
    vic.get_by_test_id("step-panel").wait_for()
    expect(vic.get_by_test_id("annotate-role-note")).to_contain_text("Annotating steps needs the curator role")
    assert vic.get_by_role("button", name="Annotate step").count() == 0
    expect(vic.get_by_test_id("save-view-role-note")).to_be_visible()
    assert vic.get_by_role("button", name="save view…").count() == 0
    vic.goto(f"{team_server.url}/sql")
    expect(vic.get_by_test_id("saved-queries-role-note")).to_contain_text("Saving queries needs the curator role")
    assert vic.get_by_role("button", name="Save as").count() == 0
    vic.goto(f"{team_server.url}/exports")
    expect(vic.get_by_role("button", name="Start export")).to_be_disabled()
    expect(vic.get_by_test_id("export-role-note")).to_contain_text("Starting an export needs the curator role")
    vic.goto(f"{team_server.url}/people")
    expect(vic.get_by_test_id("people-role-note")).to_contain_text("Managing people needs the admin role")
    assert vic.get_by_test_id("add-user").count() == 0


def test_a_refusal_reads_in_plain_words(person, team_server, team_lake):  # noqa: F811
    users.add(team_lake, "demoted", "curator", by="test")
    made = curation.create_set(team_lake, "plain words", who="bob")
    token = users.reissue(team_lake, "demoted", by="test")[1]
    team_lake.tokens["demoted"] = token
    page = person("demoted")
    page.goto(f"{team_server.url}/sets/{made['set_id']}")
    page.get_by_label("description", exact=True).fill("mine")
    users.change_role(team_lake, "demoted", "viewer", by="carol")  # while the page is open
    page.wait_for_timeout(2500)  # the server's copy of the users table refreshes (users.REFRESH_S)
    page.get_by_role("button", name="Save", exact=True).click()
    error = page.get_by_test_id("set-save-error")
    expect(error).to_have_text("Not allowed: you are signed in as demoted, a viewer, and this needs the curator role. "
                               "An admin can change your role.")
    assert "/api/" not in error.inner_text() and "Forbidden" not in error.inner_text()


def test_the_error_toast_leaves_the_note_box_clear_at_1280x800(person, team_server):  # noqa: F811
    alice = person("alice", viewport=(1280, 800))
    alice.goto(f"{team_server.url}/episodes/send_message-1/steps/1")
    note = alice.get_by_test_id("note")
    note.fill("what went wrong")
    alice.locator("body").click(position={"x": 5, "y": 300})
    alice.keyboard.press("1")  # no set chosen: an error toast
    toast = alice.get_by_test_id("toast").get_by_role("alert")
    toast.wait_for()
    t, n = toast.bounding_box(), note.bounding_box()
    assert t and n
    overlap = not (t["x"] + t["width"] <= n["x"] or n["x"] + n["width"] <= t["x"]
                   or t["y"] + t["height"] <= n["y"] or n["y"] + n["height"] <= t["y"])
    assert not overlap, f"the toast {t} covers the note box {n}"


def test_a_review_records_its_own_failing_step(person, team_server, team_lake):  # noqa: F811
    made = curation.create_set(team_lake, "step reviews", who="bob")
    curation.add_member(team_lake, made["set_id"], "set_alarm-0", failure_category="grounding", failing_step=1,
                        added_by="bob")
    alice = person("alice")
    alice.goto(f"{team_server.url}/sets/{made['set_id']}")
    step = alice.get_by_label("failing step, as you see it, of set_alarm-0")
    expect(step).to_have_value("1")  # the member's, unless she picks another
    step.fill("3")
    alice.get_by_label("your review of set_alarm-0").select_option("planning")
    alice.get_by_test_id("toast").get_by_text("Reviewed set_alarm-0: planning, failing step 3").wait_for()
    members = alice.request.get(f"{team_server.url}/api/sets/{made['set_id']}/members").json()
    review = members[0]["reviews"][0]
    assert (review["reviewer"], review["failure_category"], review["failing_step"]) == ("alice", "planning", 3)
    assert members[0]["failing_step"] == 1  # the member's own stays


def test_sql_history_keeps_a_failed_query(person, team_server):  # noqa: F811
    alice = person("alice")
    alice.goto(f"{team_server.url}/sql?q=" + "select%20no_such_column%20from%20episodes")
    alice.get_by_text(re.compile("The query failed")).wait_for()
    history = alice.get_by_test_id("sql-history")
    row = history.locator("li", has=alice.get_by_role("button", name="select no_such_column from episodes"))
    expect(row.get_by_test_id("history-failed")).to_have_text("failed")
    alice.goto(f"{team_server.url}/sql?q=" + "select%201")
    expect(history.locator("li").first).to_contain_text("select 1")
    expect(history.get_by_test_id("history-failed")).to_have_count(1)  # kept, below the newer one


def test_episode_rows_label_their_policy_version(person, team_server):  # noqa: F811
    alice = person("alice")
    alice.goto(f"{team_server.url}/?task=wifi_on")
    tree = alice.get_by_test_id("task-tree")
    tree.get_by_role("button", name=re.compile("wifi_on")).click()
    row = tree.locator("[data-episode='wifi_on-0']")
    expect(row).to_contain_text(re.compile(r"steps · policy 10$"))


def test_an_admin_manages_people(person, team_server, team_lake):  # noqa: F811
    carol = person("carol")
    carol.goto(f"{team_server.url}/people")
    table = carol.get_by_test_id("people")
    table.get_by_text("alice").wait_for()
    carol.get_by_label("new user's name").fill("dana")
    carol.get_by_label("new user's role").select_option("curator")
    carol.get_by_role("button", name="Add user").click()
    issued = carol.get_by_test_id("issued-token")
    expect(issued).to_contain_text("dana")
    first = carol.get_by_label("token issued to dana").inner_text().strip()
    assert first.startswith("elk_")
    carol.get_by_label("role of dana").select_option("viewer")
    carol.get_by_test_id("toast").get_by_text("dana is a viewer now").wait_for()
    carol.get_by_role("button", name="reissue token of dana").click()
    carol.get_by_role("dialog").get_by_role("button", name="Reissue").click()
    expect(carol.get_by_label("token issued to dana")).not_to_have_text(first)
    second = carol.get_by_label("token issued to dana").inner_text().strip()
    assert axe_violations(carol) == []
    assert second.startswith("elk_") and second != first
    assert users.Directory(team_lake, refresh_s=0).authenticate(first) is None
    assert users.Directory(team_lake, refresh_s=0).authenticate(second) == users.Principal("dana", "viewer")
    carol.get_by_role("button", name="remove dana").click()
    carol.get_by_role("dialog").get_by_role("button", name="Remove").click()
    carol.get_by_test_id("toast").get_by_text("Removed dana").wait_for()
    expect(table.locator("[data-user=dana]")).to_have_count(0)
    team_lake.invalidate()
    trail = team_lake.sql("select who, action from audit where target_id = 'dana' order by changed_at").to_pylist()
    assert [(t["who"], t["action"]) for t in trail] == [
        ("carol", "user.add"), ("carol", "user.role"), ("carol", "user.reissue"), ("carol", "user.remove")]
    # a curator reads the team and manages nobody
    alice = person("alice")
    alice.goto(f"{team_server.url}/people")
    expect(alice.get_by_test_id("people-role-note")).to_be_visible()
    assert alice.get_by_label("role of bob").count() == 0 and alice.get_by_test_id("add-user").count() == 0


LONG_TASK = "turn_on_the_do_not_disturb_schedule_for_weeknights_and_weekends"


def test_task_names_wrap_only_after_their_separators(person, team_server, team_lake):  # noqa: F811
    team_lake.upsert("episodes", [{"episode_id": "long-name-0", "run_id": "run-1", "task_name": LONG_TASK,
                                   "task_goal": "Quiet nights", "episode_length": 1, "success": True}])
    alice = person("alice", viewport=(1280, 800))
    alice.goto(f"{team_server.url}/")
    name = alice.get_by_test_id("task-tree").locator(".task-name", has_text=LONG_TASK)
    name.wait_for()
    # the character before each line break, from where each character is drawn
    before_breaks = name.evaluate("""(el) => {
        const out = []; let top = null, last = null;
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
            for (let i = 0; i < n.length; i++) {
                const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
                const y = r.getBoundingClientRect().top;
                if (top !== null && y > top + 2) out.push(last);
                top = y; last = n.data[i];
            }
        }
        return out;
    }""")
    assert before_breaks, "the long name fits on one line: the test shows nothing"
    assert set(before_breaks) == {"_"}, f"the name breaks inside a word, after {before_breaks}"
