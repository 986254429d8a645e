"""Every export format's counts are what its files hold: the manifest, the `exports` row, the
`lineage` row and the command's line count records in the format's unit (lines, Parquet rows,
dpo pairs, clawgui episode folders), never the samples fed to the writer.

The lake is the preference lake (groups of episodes sharing anchor states), so `dpo` writes
pairs, far fewer than the steps it reads, and every split can differ from its samples.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from episodelake.lake import Lake
from episodelake.lake.export import FORMATS
from episodelake.lake.ops.lineage import lineage_of
from tests.lake.export.test_export import export
from tests.lake.export.test_preference_formats import build

SPLITS = ("train", "val")


def held(fmt: str, out: Path) -> dict[str, int]:
    """Records per split, read from the files alone (no manifest)."""
    counted = {}
    for split in SPLITS:
        if fmt == "trl":
            path = out / f"{split}.parquet"
            counted[split] = pq.read_metadata(path).num_rows if path.exists() else 0
        elif fmt == "clawgui":
            counted[split] = len(list((out / split).glob("*/*/episode.json")))
        else:
            path = out / f"{split}.jsonl"
            counted[split] = len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0
    return counted


UNITS = {"llamafactory": "samples", "swift": "samples", "trl": "samples", "openai": "samples",
         "prm": "samples", "dpo": "pairs", "clawgui": "episodes"}


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    return build(tmp_path_factory.mktemp("counts") / "lake")


def test_every_registered_format_is_counted_here():
    assert set(FORMATS) == set(UNITS), "count the new format's files in held() and name its unit"


@pytest.mark.parametrize("fmt", sorted(UNITS))
def test_counts_are_what_the_files_hold(lake, tmp_path, fmt):
    out = tmp_path / "out"
    # a val share that puts one of the two tasks in each split (task split by hash, seed 3)
    result = export(lake, out, fmt, include_failed=True, val_fraction=0.5, seed=3, history_images=1)
    counts = result.manifest["counts"]
    files = held(fmt, out)
    assert counts["samples"] == files and all(files.values()), files
    assert counts["unit"] == UNITS[fmt] == FORMATS[fmt].unit
    assert json.loads((out / "manifest.json").read_text())["counts"] == counts
    row = lake.sql("SELECT samples FROM exports WHERE export_id = ?", [result.export_id]).to_pylist()[0]
    assert row["samples"] == sum(files.values())
    (lineage,) = lineage_of(lake, result.export_id)
    assert lineage["counts"]["samples"] == files and lineage["counts"]["unit"] == UNITS[fmt]
    if UNITS[fmt] == "samples":
        assert "step_samples" not in counts
    else:  # pairs or episodes: fewer than the step samples they were made from
        assert sum(files.values()) < sum(counts["step_samples"].values())


def test_the_dpo_command_line_counts_pairs(lake, tmp_path):
    out = tmp_path / "pairs"
    proc = subprocess.run([sys.executable, "-m", "episodelake.api.cli", "--lake", str(lake.path), "export", "sft",
                           "--format", "dpo", "--include-failed", "--val-fraction", "0.5", "--seed", "3",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    files = held("dpo", out)
    line = re.search(r"(\d+) train \+ (\d+) val pairs \(made from (\d+) step sample", proc.stdout)
    assert line, proc.stdout
    assert (int(line[1]), int(line[2])) == (files["train"], files["val"])
    assert int(line[3]) > files["train"] + files["val"]
