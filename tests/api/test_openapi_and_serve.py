"""The web client is typed from the committed OpenAPI document, so it must match the API;
`elake serve` binds loopback by default and refuses shared binds without a token."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from episodelake.api.app import create_app
from episodelake.api.routes import groups
from episodelake.api.settings import Settings
from tests.factories import free_port
from tests.waiting import wait_serving

ROOT = Path(__file__).resolve().parents[2]
ELAKE = [sys.executable, "-m", "episodelake.api.cli"]


def test_committed_openapi_matches_the_api(tmp_path):
    committed = json.loads((ROOT / "web" / "openapi.json").read_text())
    current = create_app(Settings(lake=tmp_path, static_dir=None)).openapi()
    assert committed == json.loads(json.dumps(current)), "the API changed: run `just web-client`"


def test_every_operation_documents_the_error_shape(tmp_path):
    doc = create_app(Settings(lake=tmp_path, static_dir=None)).openapi()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for code in ("404", "422"):
                ref = op["responses"][code]["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorBody"), (method, path, code)


def test_group_page_shows_what_a_training_step_computes(lake):
    """The page's advantages use `elake train`'s defaults, not the bare function's."""
    import duckdb

    from episodelake.trainer.advantages import compute_advantages
    from episodelake.trainer.config import TrainConfig

    values, note = groups.trainer_values(lake, "g-wifi_on", 0.9)
    assert values and "trainer's defaults" in note and "gamma=0.9" in note
    con = duckdb.connect()
    episodes = lake.sql("SELECT * FROM episodes WHERE group_id = 'g-wifi_on'")
    steps = lake.sql("SELECT s.* EXCLUDE (image) FROM steps s JOIN episodes e USING (episode_id) "
                     "WHERE e.group_id = 'g-wifi_on'")
    expected = compute_advantages(con, TrainConfig().advantages.replace(gamma=0.9),
                                  steps=steps, episodes=episodes)
    for row in expected.table.to_pylist():  # DuckDB's parallel sums vary in the last bit
        got = values[(row["episode_id"], row["step"])]["advantage"]
        assert got == pytest.approx(row["advantage"], rel=1e-12, abs=1e-12)


def test_serve_on_loopback(lake):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "ELAKE_TOKEN"}
    proc = subprocess.Popen([*ELAKE, "--lake", str(lake.path), "serve", "--port", str(port)], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        r = wait_serving(f"http://127.0.0.1:{port}/api/health", proc)
        assert r.status_code == 200 and r.json()["tables"]["episodes"] == 9
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_serve_refuses_a_shared_bind_without_a_token(lake):
    env = {k: v for k, v in os.environ.items() if k != "ELAKE_TOKEN"}
    done = subprocess.run([*ELAKE, "--lake", str(lake.path), "serve", "--host", "0.0.0.0"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "ELAKE_TOKEN" in done.stderr
