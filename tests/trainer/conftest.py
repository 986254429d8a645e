import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_vlm(tmp_path_factory) -> Path:
    """A tiny random Qwen2-VL model folder (see tiny_vlm.py), built once per session."""
    from tests.trainer.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm"))
