"""The layers import in one direction: lake -> collectors -> trainer -> api, and inside the
collectors record -> envs -> loop -> agents -> jobs | clawgui (the contracts are in
pyproject.toml under [tool.importlinter]). An upward import, even one inside a function,
fails here with the chain of imports that breaks the contract."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def test_imports_follow_the_layers():
    proc = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, report
    # not kept by default: every package was found and read, and both contracts ran
    analysed = re.search(r"Analyzed (\d+) files", report)
    assert analysed and int(analysed.group(1)) > 100, report
    assert "Contracts: 2 kept, 0 broken." in report, report
