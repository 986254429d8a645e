"""Branching from the replay page in headless Chromium over a real server on a lake of
simulated-phone episodes with users: a viewer is told which role "Branch from this step"
needs; a curator branches from the step shown, sees the job's progress, then the branches
linked under the parent, each saying where it branched from (linking back), and opens Compare
with the parent and its branches aligned at the branch step. axe finds nothing serious."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from episodelake.api.settings import Settings, default_static_dir
from episodelake.lake.ops import users
from tests.api.test_branches_api import parents, sim_lake
from tests.api.webapp_support import ServerThread
from tests.browser.conftest import axe_violations, shot, signed_in_pages

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PEOPLE = {"cora": "curator", "vic": "viewer"}
K = 2


@pytest.fixture(scope="module")
def branch_lake(tmp_path_factory):
    lake = sim_lake(tmp_path_factory.mktemp("branching") / "lake")
    lake.tokens = {name: users.add(lake, name, role, by="test")[1]  # type: ignore[attr-defined]
                   for name, role in PEOPLE.items()}
    return lake


@pytest.fixture(scope="module")
def branch_server(branch_lake):
    static = default_static_dir()
    if static is None:
        pytest.fail("the web app is not built: run `just web` (builds web/ into api/static)")
    with ServerThread(Settings(lake=branch_lake.path, static_dir=static), branch_lake) as srv:
        yield srv


@pytest.fixture
def person(chromium, branch_server, branch_lake):
    yield from signed_in_pages(chromium, branch_server, branch_lake.tokens)


def test_a_viewer_is_told_which_role_branching_needs(person, branch_server, branch_lake):
    parent = parents(branch_lake)[0]["episode_id"]
    vic = person("vic")
    vic.goto(f"{branch_server.url}/episodes/{parent}/steps/{K}")
    vic.get_by_test_id("step-panel").wait_for()
    expect(vic.get_by_test_id("branch-role-note")).to_contain_text("Branching from a step needs the curator role")
    assert vic.get_by_role("button", name="Branch from this step").count() == 0


def test_a_curator_branches_from_the_replay_and_compares_at_the_branch_step(person, branch_server, branch_lake):
    parent = parents(branch_lake)[0]["episode_id"]
    page = person("cora")
    page.goto(f"{branch_server.url}/episodes/{parent}/steps/{K}")
    page.get_by_test_id("step-panel").wait_for()
    assert page.get_by_test_id("branches").count() == 0  # nothing branched yet

    page.get_by_role("button", name="Branch from this step").click()
    form = page.get_by_test_id("branch-form")
    expect(form).to_contain_text(f"Branch from step {K}")
    form.get_by_label("number of branches").fill("4")
    form.get_by_label("policy of the branches").select_option("random")
    assert axe_violations(page) == []
    form.get_by_role("button", name="Start branching").click()
    expect(page.get_by_test_id("toast")).to_contain_text(f"Branching {parent} at step {K}: 4 branches")

    # the job's progress under the episode's info while it runs, then its branches linked there
    job = page.get_by_test_id("branch-job")
    expect(job).to_contain_text(f"branching at step {K} (4 × random)")
    expect(job.get_by_test_id("job-state")).to_have_attribute("data-status", "running")
    expect(job.get_by_role("progressbar", name="progress")).to_be_visible()
    shot(page, "branching-progress")
    listed = page.get_by_test_id("branch-list")
    expect(listed).to_have_attribute("data-step", str(K), timeout=120_000)
    expect(listed).to_contain_text(f"4 branches at step {K}:")
    expect(job).to_have_count(0)  # done, nothing refused: the job line gives way to its branches
    branch_links = listed.locator("a.chip")
    expect(branch_links).to_have_count(4)
    branches = [t.strip().split()[-1] for t in branch_links.all_inner_texts()]
    branch_lake.invalidate()
    stored = {r["episode_id"] for r in branch_lake.sql("SELECT episode_id FROM episodes WHERE branch_of = ? AND branch_step = ?",
                                                      [parent, K]).to_pylist()}
    assert set(branches) == stored and len(stored) == 4
    assert axe_violations(page) == []
    shot(page, "branching-parent")

    # a branch says where it came from, and links back to the parent at step K
    branch_links.first.click()
    page.wait_for_url(re.compile(rf"/episodes/{branches[0]}/steps/{K}$"))
    back = page.get_by_test_id("branched-from")
    expect(back).to_contain_text(f"branched from {parent} at step {K}")
    assert axe_violations(page) == []
    back.get_by_role("link", name=parent).click()
    page.wait_for_url(re.compile(rf"/episodes/{parent}/steps/{K}$"))

    # Compare: the parent and its branches side by side, aligned at step K
    page.get_by_test_id("compare-branches").click()
    page.wait_for_url(re.compile(rf"/compare/{parent}/.+\?step={K}&align={K}$"))
    assert page.url.split("/compare/")[1].split("?")[0].split("/") == [parent, *branches]
    expect(page.get_by_test_id("compare-column")).to_have_count(5)
    expect(page.get_by_test_id("compare-align")).to_contain_text(f"aligned at step {K}: the branches' steps before it replay")
    expect(page.get_by_test_id("compare-step")).to_contain_text(f"step {K} (")
    steps = page.get_by_test_id("compare-column-step").all_inner_texts()
    assert all(s.startswith(f"step {K} (") and "replayed" not in s for s in steps), steps
    expect(page.get_by_test_id("compare-branch-of")).to_have_count(4)
    expect(page.locator(".compare-table tr.align-step")).to_contain_text("branch point")
    expect(page.locator(".compare-table tr.current")).to_contain_text("branch point")
    assert axe_violations(page) == []
    shot(page, "branching-compare")
    # a step before K: the branches replayed the parent's action there, the same in every column
    page.keyboard.press("a")
    page.wait_for_url(re.compile(rf"\?step={K - 1}&align={K}$"))
    # the columns re-render after the address changes: wait for step K-1 in every one
    expect(page.get_by_test_id("compare-column-step")).to_have_text(
        [re.compile(rf"^step {K - 1} \((?!.*replayed).*$"), *[re.compile(rf"^step {K - 1} .*· replayed$")] * 4])
    current = page.locator(".compare-table tr.current td").all_inner_texts()[1:]
    assert len(set(current)) == 1, current
