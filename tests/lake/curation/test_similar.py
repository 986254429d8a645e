"""Screens like this one: embeddings of simulated-phone screenshots searched with Lance's
vector search (flat and through a real IVF_PQ index), and near-duplicates left out of SFT
exports. The sim's ground-truth screen id says which screenshots show the same state."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from episodelake.api.cli import main
from episodelake.collectors.agents.oracle import DemoPolicy, NoiseConfig
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.tasks import get_task
from episodelake.collectors.jobs.enrich import enrich
from episodelake.collectors.jobs.rekey import rekey_anchors
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation.similar import INDEX_NAME, has_index, refresh_index, similar
from episodelake.lake.derive.embedding import (
    EMBEDDING_VERSION,
    embedding_anchor_keys,
    screen_embedding,
)
from episodelake.lake.export.job import run_export
from episodelake.lake.export.spec import ExportSpec
from episodelake.lake.ops.updates import update_columns
from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import InvalidInput, NotFound, SqlRefused
from tests import factories

TASKS = ("wifi_on", "bluetooth_on")
#: (task, seed, policy version) of each recorded episode; seeds move the status-bar clock
ROLLOUTS = [(task, seed, f"v{1 + seed % 2}") for task in TASKS for seed in (1, 2, 3)]


def record_sim(lake: Lake, rollouts=ROLLOUTS) -> dict[tuple[str, int], str]:
    """Oracle episodes of the simulated phone; returns each step's ground-truth screen id."""
    truth = {}
    with Recorder(lake, run_id="sim-run", env="sim", image_checks="structure") as rec:
        for task_id, seed, version in rollouts:
            task = get_task(task_id)
            phone = Phone(seed)
            task.setup(phone)
            policy = DemoPolicy(task, NoiseConfig(), seed)
            episode_id = f"{task_id}-{seed}"
            with rec.start_episode(task_id, task.goal, episode_id=episode_id, policy_version=version,
                                   group_id=f"g-{task_id}") as ep:
                for step in range(12):
                    truth[(episode_id, step)] = phone.screen_id()
                    decision = policy.decide(phone)
                    ep.log_step(phone.screenshot(), decision.response)
                    if phone.step(decision.arguments).done:
                        break
                ep.finish(success=True, eval_score=1.0)
    return truth


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> tuple[Lake, dict[tuple[str, int], str]]:
    lake = Lake(tmp_path_factory.mktemp("similar") / "lake")
    truth = record_sim(lake)
    report = enrich(lake, ["embed"])
    assert report.steps["embed"] == len(truth)
    return lake, truth


def test_nearest_screen_of_another_episode_is_the_same_state(sim):
    lake, truth = sim
    checked = 0
    for (episode_id, step), screen in truth.items():
        [hit] = similar(lake, episode_id, step, k=1, where=f"s.episode_id <> '{episode_id}'")
        assert hit.episode_id != episode_id
        assert truth[(hit.episode_id, hit.step)] == screen, (episode_id, step)
        assert hit.distance < 1e-3  # the same state below a status bar whose clock differs
        checked += 1
    assert checked == len(truth) > 10
    shas = {r["image_sha256"] for r in lake.sql("select image_sha256 from steps").to_pylist()}
    assert len(shas) == len(truth)  # every screenshot differs (the clock), yet neighbours match


def test_distinct_screens_are_far_and_order_is_by_distance(sim):
    lake, truth = sim
    hits = similar(lake, "wifi_on-1", 0, k=len(truth) - 1)
    assert len(hits) == len(truth) - 1 and ("wifi_on-1", 0) not in {(h.episode_id, h.step) for h in hits}
    assert [h.distance for h in hits] == sorted(h.distance for h in hits)
    screen = truth[("wifi_on-1", 0)]
    same = [h.distance for h in hits if truth[(h.episode_id, h.step)] == screen]
    other = [h.distance for h in hits if truth[(h.episode_id, h.step)] != screen]
    assert max(same) < 1e-3 < 0.01 < min(other)


def test_where_restricts_across_policy_versions(sim):
    lake, _ = sim
    hits = similar(lake, "wifi_on-1", 1, k=50, where="e.policy_version = 'v1' AND e.task_name = 'bluetooth_on'")
    assert hits and {h.episode_id for h in hits} == {"bluetooth_on-2"}  # seed 2 is v1
    with pytest.raises(SqlRefused, match="where 'nope\\('"):
        similar(lake, "wifi_on-1", 1, where="nope(")
    with pytest.raises(InvalidInput, match="k must be"):
        similar(lake, "wifi_on-1", 1, k=0)


def test_embedding_is_stored_with_its_version(sim):
    lake, _ = sim
    row = lake.sql("select embedding, embedding_version from steps where episode_id = 'wifi_on-1' "
                   "and step = 0").to_pylist()[0]
    image, _ = lake.image("wifi_on-1", 0)
    assert row["embedding_version"] == EMBEDDING_VERSION
    assert len(row["embedding"]) == schema.EMBEDDING_DIM
    assert np.allclose(row["embedding"], screen_embedding(image))
    assert abs(np.linalg.norm(row["embedding"]) - 1) < 1e-5


def test_a_step_without_an_embedding_names_the_enrichment(tmp_path, capsys):
    lake = Lake(tmp_path / "lake")
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        with rec.start_episode("t", "goal", episode_id="plain-1", group_id="g") as ep:
            ep.log_step(factories.screenshot(1), factories.response())
            ep.finish(success=True)
    with pytest.raises(NotFound, match="elake enrich --what embed"):
        similar(lake, "plain-1", 0)
    with pytest.raises(NotFound, match="dedupe_similar: 1 selected step.*elake enrich --what embed"):
        run_export(lake, ExportSpec(format="llamafactory", dedupe_similar=0.01, out=tmp_path / "out"))
    with pytest.raises(NotFound, match="embedding_threshold: 1 selected step.*elake enrich --what embed"):
        rekey_anchors(lake, embedding_threshold=0.0)
    with pytest.raises(NotFound, match="no step 5"):
        similar(lake, "plain-1", 5)
    assert main(["--lake", str(lake.path), "similar", "plain-1", "0"]) != 0
    assert "elake enrich --what embed" in capsys.readouterr().err


def test_cli_prints_neighbours(sim, capsys):
    lake, truth = sim
    assert main(["--lake", str(lake.path), "similar", "wifi_on-1", "0", "--k", "2", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2 and all(truth[(r["episode_id"], r["step"])] == truth[("wifi_on-1", 0)] for r in rows)


def test_vector_index_is_built_used_and_covers_later_rows(tmp_path):
    """600 synthetic embeddings (PQ needs a few hundred rows to train) on recorded steps."""
    lake = Lake(tmp_path / "lake")
    with Recorder(lake, anchor=None, image_checks="structure") as rec:
        for e in range(3):
            with rec.start_episode("t", "goal", episode_id=f"ep-{e}") as ep:
                for _ in range(200):
                    ep.log_step(factories.screenshot(0), factories.response())
    rng = np.random.default_rng(7)  # 100 screens, each seen 6 times with a little noise
    centres = rng.standard_normal((100, schema.EMBEDDING_DIM)).astype(np.float32)
    vectors = centres[np.arange(600) % 100] + 0.02 * rng.standard_normal((600, schema.EMBEDDING_DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = [{"episode_id": f"ep-{i // 200}", "step": i % 200, "embedding": vectors[i].tolist(),
             "embedding_version": EMBEDDING_VERSION} for i in range(600)]
    update_columns(lake, "steps", rows[:500])
    assert refresh_index(lake) == "flat" and not has_index(lake)  # below INDEX_MIN_ROWS
    flat = similar(lake, "ep-0", 3, k=4)
    assert refresh_index(lake, min_rows=400) == "built" and has_index(lake)
    plan = lake.dataset("steps").scanner(nearest={"column": "embedding", "q": vectors[3], "k": 5}).explain_plan()
    assert f"ANNSubIndex: name={INDEX_NAME}" in plan
    assert {(h.episode_id, h.step) for h in flat} == {(f"ep-{i // 200}", i % 200) for i in range(103, 500, 100)}
    assert [(h.episode_id, h.step) for h in similar(lake, "ep-0", 3, k=4)] == [(h.episode_id, h.step) for h in flat]
    update_columns(lake, "steps", rows[500:])  # embedded after the build: still found
    hits = similar(lake, "ep-0", 50, k=5)  # row 50's screen: rows 150, ..., 550, the last unindexed
    assert {(h.episode_id, h.step) for h in hits} == {(f"ep-{i // 200}", i % 200) for i in range(150, 600, 100)}
    assert refresh_index(lake) == "updated"
    assert lake.dataset("steps").stats.index_stats(INDEX_NAME)["num_unindexed_rows"] == 0


def test_export_drops_near_duplicate_screens_of_a_task(sim, tmp_path):
    lake, truth = sim
    base = {"format": "llamafactory", "include_failed": True}
    full = run_export(lake, ExportSpec(**base, out=tmp_path / "all"))
    deduped = run_export(lake, ExportSpec(**base, dedupe_similar=0.0005, out=tmp_path / "dedup"))
    screens = {(eid.rsplit("-", 1)[0], screen) for (eid, _), screen in truth.items()}
    assert sum(full.samples.values()) == len(truth)
    assert sum(deduped.samples.values()) == len(screens)  # one sample per (task, screen state)
    skipped = deduped.manifest["counts"]["skipped"]
    assert skipped["near_duplicate"] == len(truth) - len(screens)
    assert deduped.manifest["spec"]["dedupe_similar"] == 0.0005
    with pytest.raises(InvalidInput, match="dedupe_similar"):
        ExportSpec(**base, dedupe_similar=0.1, granularity="episode", out=tmp_path / "x")


def test_rekey_by_embedding_gives_one_key_per_screen_state(sim, capsys):
    lake, truth = sim
    report = rekey_anchors(lake, embedding_threshold=0.0)
    assert report.steps == len(truth) and report.groups == len(TASKS)
    rows = lake.sql("select s.episode_id, s.step, s.anchor_key, e.group_id from steps s "
                    "join episodes e using (episode_id)").to_pylist()
    keys = {(r["episode_id"], r["step"]): (r["group_id"], r["anchor_key"]) for r in rows}
    assert all(key.startswith("em:") for _, key in keys.values())
    for a, b in itertools.combinations(keys, 2):
        if keys[a][0] == keys[b][0]:  # keys mean something within a group
            assert (keys[a][1] == keys[b][1]) == (truth[a] == truth[b]), (a, b)
    assert main(["--lake", str(lake.path), "rekey", "--embedding-threshold", "0"]) == 0
    assert "0 key(s) changed" in capsys.readouterr().out
    with pytest.raises(InvalidInput, match="embedding_threshold"):
        rekey_anchors(lake, embedding_threshold=3.0)


def test_embedding_anchor_keys_group_same_states():
    a, b = screen_embedding(factories.screenshot(1)), screen_embedding(factories.screenshot(2))
    keys = embedding_anchor_keys([a, b, a.copy()], threshold=0.0)
    assert keys[0] == keys[2] != keys[1]
    assert embedding_anchor_keys([b, a, a], 0.0)[1:] == keys[:1] * 2  # order does not matter
