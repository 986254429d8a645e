"""Branching through the API over a real server, on a lake of simulated-phone episodes: a
branch job started at step K runs with progress and records its branches (branch_of,
branch_step, the job's run_id, the replayed prefix the parent's), which the parent's and the
branch's own answers link; `failing` resolves to the judge's first low step; bad input (a step
beyond the episode, an unknown episode, a parent not of the simulated phone, a model policy,
a negative step) is the request's error naming it and leaves no job; a viewer is refused with
the role named, a curator is not."""

from __future__ import annotations

import httpx
import pytest

from episodelake.api.settings import Settings
from episodelake.collectors.jobs.branch import BranchSpec, run_branches
from episodelake.collectors.jobs.rollout import RolloutSpec, demo_agent, run_rollouts
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake.ops import users
from episodelake.lake.storage.lake import Lake
from episodelake.lake.vocab.families import format_tool_call
from tests.api.webapp_support import ServerThread, error_of, screen
from tests.waiting import wait_job

TASKS = ("notes_create[title=Groceries,body=milk]", "contacts_add[name=Nora Blake,phone=555-0141]")


def sim_lake(path) -> Lake:
    """Demo-policy episodes of the simulated phone (judged step by step), and one adb episode."""
    lake = Lake(path)
    run_rollouts(lake, RolloutSpec(TASKS, group_size=3, max_steps=12, run_id="parents", seed=4),
                 demo_agent("demo"), progress=False, backend="thread")
    with Recorder(lake, run_id="elsewhere", env="adb") as rec:
        ep = rec.start_episode("open_the_bank_app", "Open the bank app", episode_id="bank-0")
        for k in range(2):
            ep.log_step(screen(0, k), format_tool_call({"action": "click", "coordinate": [10, 10]}), reward=0.0)
        ep.finish(success=False)
    lake.invalidate()
    return lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    return sim_lake(tmp_path_factory.mktemp("branch-api") / "lake")


@pytest.fixture(scope="module")
def client(lake):
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            yield c


def parents(lake: Lake) -> list[dict]:
    return lake.sql("SELECT episode_id, episode_length, success FROM episodes WHERE run_id = 'parents' "
                    "ORDER BY episode_length DESC, episode_id").to_pylist()


def first_low_step(lake: Lake, episode_id: str) -> int | None:
    rows = lake.sql("SELECT min(step) AS k FROM steps WHERE episode_id = ? AND step_reward < 0.5",
                    [episode_id]).to_pylist()
    return rows[0]["k"]


def branch_jobs(client) -> list[str]:
    r = client.get("/api/branches")
    assert r.status_code == 200, r.text
    return [j["branch_id"] for j in r.json()]


def test_a_branch_job_runs_with_progress_and_links_parent_and_branches(client, lake):
    parent = parents(lake)[0]["episode_id"]
    assert parents(lake)[0]["episode_length"] >= 4
    r = client.post("/api/branches", json={"episode_id": parent, "at": 2, "n": 2, "policy": "random"})
    assert r.status_code == 202, r.text
    started = r.json()
    assert started["branch_id"].startswith("branch-") and started["parent"] == parent and started["step"] == 2
    assert started["status"] in ("running", "done") and started["progress"]["total"] in (None, 2)
    job = wait_job(client, f"/api/branches/{started['branch_id']}", timeout_s=120)
    assert job["status"] == "done", job
    assert job["progress"] == {"done": 2, "total": 2} and job["refused"] == []
    assert job["who"].startswith("api ")
    assert len(job["branches"]) == 2
    for branch in job["branches"]:
        assert (branch["branch_of"], branch["branch_step"], branch["run_id"]) == (parent, 2, started["branch_id"])
        assert "branch" in branch["tags"]

    # the parent lists its branches and the job; each branch says where it came from
    listed = client.get(f"/api/episodes/{parent}/branches").json()
    assert {b["episode_id"] for b in listed["branches"]} == {b["episode_id"] for b in job["branches"]}
    assert [j["branch_id"] for j in listed["jobs"]] == [started["branch_id"]]
    assert listed["jobs"][0]["status"] == "done"
    child = job["branches"][0]["episode_id"]
    detail = client.get(f"/api/episodes/{child}").json()
    assert (detail["episode"]["branch_of"], detail["episode"]["branch_step"]) == (parent, 2)
    assert client.get(f"/api/episodes/{parent}").json()["episode"]["branch_of"] is None
    # the replayed prefix is the parent's actions; the branch acted on its own from step 2
    mine = [s["action_view"]["summary"] for s in detail["steps"]]
    theirs = [s["action_view"]["summary"] for s in client.get(f"/api/episodes/{parent}").json()["steps"]]
    assert mine[:2] == theirs[:2] and len(mine) > 2
    # a branch has no branches of its own yet; the jobs listing has this one
    assert client.get(f"/api/episodes/{child}/branches").json() == {"episode_id": child, "branches": [], "jobs": []}
    assert started["branch_id"] in branch_jobs(client)
    assert client.get(f"/api/jobs/{started['branch_id']}").json()["kind"] == "branch"


def test_failing_branches_at_the_judges_first_low_step(client, lake):
    failed = [p["episode_id"] for p in parents(lake) if first_low_step(lake, p["episode_id"]) not in (None, 0)]
    assert failed, "the demo policy goes wrong somewhere in these"
    parent = failed[0]
    r = client.post("/api/branches", json={"episode_id": parent, "at": "failing", "n": 1, "policy": "oracle"})
    assert r.status_code == 202, r.text
    assert r.json()["step"] == first_low_step(lake, parent) and r.json()["at"] == "failing"
    job = wait_job(client, f"/api/branches/{r.json()['branch_id']}", timeout_s=120)
    assert job["status"] == "done" and [b["branch_step"] for b in job["branches"]] == [first_low_step(lake, parent)]


def test_a_branch_job_of_the_command_line_shows_like_the_apis(client, lake):
    parent = parents(lake)[1]["episode_id"]
    report = run_branches(lake, BranchSpec(episode_ids=(parent,), at="1", n=1, policy="oracle"))
    listed = client.get(f"/api/episodes/{parent}/branches").json()
    job = next(j for j in listed["jobs"] if j["branch_id"] == report["branch_id"])
    assert (job["parent"], job["step"], job["at"], job["n"], job["policy"], job["status"]) == (
        parent, 1, "1", 1, "oracle", "done")
    assert [b["episode_id"] for b in job["branches"]] == [report["branches"][0]["episode_id"]]
    assert report["branches"][0]["episode_id"] in {b["episode_id"] for b in listed["branches"]}


def test_bad_input_is_the_requests_error_naming_it_and_starts_no_job(client, lake):
    parent = parents(lake)[0]
    before = branch_jobs(client)
    beyond = parent["episode_length"] + 5
    cases = [
        ({"episode_id": parent["episode_id"], "at": beyond, "policy": "random"}, 422,
         f"episode {parent['episode_id']}: step {beyond} is beyond the episode's recorded steps"),
        ({"episode_id": "no-such-episode", "at": 1, "policy": "random"}, 404, "episode 'no-such-episode' is not in the lake"),
        ({"episode_id": "bank-0", "at": 1, "policy": "random"}, 422, "episode bank-0 was recorded on env 'adb'"),
        ({"episode_id": parent["episode_id"], "at": 1, "policy": "model"}, 422, "policy must be one of oracle, noisy, random"),
        ({"episode_id": parent["episode_id"], "at": -1, "policy": "random"}, 422, "at"),
        ({"episode_id": parent["episode_id"], "at": "soon", "policy": "random"}, 422, "at"),
        ({"episode_id": parent["episode_id"], "at": 1, "policy": "random", "n": 0}, 422, "n"),
        ({"episode_id": parent["episode_id"], "at": 3, "policy": "random", "max_steps": 3}, 422,
         "a branch at step 3 needs max_steps above 3"),
    ]
    for body, status, message in cases:
        r = client.post("/api/branches", json=body)
        assert r.status_code == status, (body, r.text)
        assert message in error_of(r)["message"], (body, error_of(r))
    assert "elake branch bank-0" in error_of(client.post("/api/branches", json=cases[2][0]))["message"]
    assert branch_jobs(client) == before
    missing = client.get("/api/branches/branch-000000000000")
    assert missing.status_code == 404 and "GET /api/branches" in error_of(missing)["message"]
    assert client.get("/api/episodes/no-such-episode/branches").status_code == 404


def test_a_viewer_is_refused_with_the_role_named_and_a_curator_branches(tmp_path):
    lake = sim_lake(tmp_path / "lake")
    tokens = {role: users.add(lake, f"{role}-1", role, by="test")[1] for role in ("viewer", "curator")}
    parent = parents(lake)[0]["episode_id"]
    body = {"episode_id": parent, "at": 1, "n": 1, "policy": "random"}
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        with httpx.Client(base_url=srv.url, timeout=60, headers={"Authorization": f"Bearer {tokens['viewer']}"}) as c:
            refused = c.post("/api/branches", json=body)
            assert refused.status_code == 403
            assert "viewer-1 is a viewer" in error_of(refused)["message"]
            assert "needs the curator role" in error_of(refused)["message"]
            assert c.get(f"/api/episodes/{parent}/branches").json()["jobs"] == []  # viewers read
        with httpx.Client(base_url=srv.url, timeout=60, headers={"Authorization": f"Bearer {tokens['curator']}"}) as c:
            r = c.post("/api/branches", json=body)
            assert r.status_code == 202, r.text
            job = wait_job(c, f"/api/branches/{r.json()['branch_id']}", timeout_s=120)
            assert job["status"] == "done" and job["who"] == "curator-1" and len(job["branches"]) == 1
        schema = httpx.get(f"{srv.url}/openapi.json", headers={"Authorization": f"Bearer {tokens['viewer']}"})
        assert schema.json()["paths"]["/api/branches"]["post"]["x-role"] == "curator"
