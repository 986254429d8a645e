"""A DeepSpeed ZeRO stage-2 update of the VLM policy on CPU (gloo, one process).

The first run compiles DeepSpeed's C++ communication op (minutes on a small CPU); it is
cached under .cache/torch_extensions in the repository for later runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_one_zero2_step_on_cpu_updates_the_weights_and_checkpoints(tiny_vlm, tmp_path):
    pytest.importorskip("deepspeed")
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "TORCH_EXTENSIONS_DIR": str(REPO / ".cache" / "torch_extensions")}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)  # the engine sets up a single-process group itself
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("deepspeed_step.py")), str(tiny_vlm),
         str(tmp_path)], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["engine"] == "deepspeed" and found["zero_stage"] == 2
    assert found["global_steps"] == 1
    assert found["changed_parameters"] > found["parameters"] // 2
    assert "last" in found["saved"]
