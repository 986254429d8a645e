"""The web app's pure logic (filters in the URL, overlay geometry, URL state) under vitest,
run by `just test` like every other suite. `just web` installs the locked packages first."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
NODE_BIN = ROOT / ".nodeenv" / "bin"
VITEST = WEB / "node_modules" / ".bin" / "vitest"


def test_vitest_suites_pass(tmp_path):
    if not VITEST.exists():
        pytest.skip("web/node_modules has no vitest: run `just web` (it installs the locked packages)")
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "CI": "1"}
    report = tmp_path / "vitest.json"
    proc = subprocess.run([str(VITEST), "run", "--reporter=json", f"--outputFile={report}"], cwd=WEB,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    result = json.loads(report.read_text())
    files = {Path(r["name"]).name for r in result["testResults"]}
    # the suites this file stands for ran, and each had tests that passed
    assert {"filters.test.ts", "overlayGeometry.test.ts", "url.test.ts", "sqlConsole.test.ts"} <= files, files
    assert result["numFailedTests"] == 0 and result["numPassedTests"] >= 12, result["numPassedTests"]
