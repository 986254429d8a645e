"""GET /api/episodes/{episode_id}/steps/{step}/similar on a real server over embedded sim steps."""

from __future__ import annotations

import httpx
import pytest

from episodelake.api.settings import Settings
from episodelake.collectors.agents.oracle import DemoPolicy, NoiseConfig
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.tasks import get_task
from episodelake.collectors.jobs.enrich import enrich
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from tests import factories
from tests.api.webapp_support import ServerThread


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    lake = Lake(tmp_path_factory.mktemp("similar") / "lake")
    task = get_task("wifi_on")
    with Recorder(lake, image_checks="structure") as rec:
        for seed, version in ((1, "v1"), (2, "v2")):
            phone = Phone(seed)
            task.setup(phone)
            policy = DemoPolicy(task, NoiseConfig(), seed)
            with rec.start_episode(task.id, task.goal, episode_id=f"wifi-{seed}", policy_version=version) as ep:
                for _ in range(3):
                    decision = policy.decide(phone)
                    ep.log_step(phone.screenshot(), decision.response)
                    phone.step(decision.arguments)
        with rec.start_episode("plain", "no embedding", episode_id="plain-1") as ep:
            ep.log_step(factories.screenshot(3), factories.response())
    enrich(lake, ["embed"], where="e.episode_id <> 'plain-1'")
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as c:
        yield c


def test_similar_returns_the_same_screen_of_the_other_episode_first(client):
    r = client.get("/api/episodes/wifi-1/steps/1/similar", params={"k": 2})
    assert r.status_code == 200, r.text
    first, second = r.json()
    assert (first["episode_id"], first["step"]) == ("wifi-2", 1) and first["distance"] < 1e-3
    assert second["distance"] > first["distance"]
    only = client.get("/api/episodes/wifi-1/steps/1/similar", params={"where": "e.policy_version = 'v1'"}).json()
    assert {n["episode_id"] for n in only} == {"wifi-1"}


def test_missing_embedding_and_bad_input_are_named(client):
    r = client.get("/api/episodes/plain-1/steps/0/similar")
    assert r.status_code == 404 and "elake enrich --what embed" in r.json()["error"]["message"]
    assert client.get("/api/episodes/wifi-1/steps/9/similar").status_code == 404
    bad = client.get("/api/episodes/wifi-1/steps/1/similar", params={"where": "nope("})
    assert bad.status_code == 400 and "where 'nope('" in bad.json()["error"]["message"]
    assert client.get("/api/episodes/wifi-1/steps/1/similar", params={"k": 0}).status_code == 422
