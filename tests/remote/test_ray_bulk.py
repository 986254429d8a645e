"""The bulk path: exports and re-keying as Ray tasks give exactly what one process gives
(the same files, the same keys), written through the lake's own paths."""

from __future__ import annotations

import shutil

import pytest

from episodelake.api.cli import main
from episodelake.collectors.jobs.bulk import RayOptions, chunks, run_parts
from episodelake.collectors.jobs.rekey import rekey_anchors
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.export import ExportSpec, run_export
from episodelake.lake.storage.errors import InvalidInput
from tests.factories import needs_ray, response, screenshot
from tests.lake.export.test_export import build_lake, tree
from tests.remote.ray_cluster import ray_cluster  # noqa: F401

pytestmark = [needs_ray, pytest.mark.slow, pytest.mark.usefixtures("ray_cluster"),
              pytest.mark.filterwarnings("ignore:lance is not fork-safe")]


def test_run_parts_keeps_the_order_of_the_parts():
    parts = chunks(list(range(23)), 4)
    assert [len(p) for p in parts] == [4, 4, 4, 4, 4, 3]
    here = list(run_parts(sum, parts))
    assert list(run_parts(sum, parts, ray=RayOptions(ray=True), window=2)) == here
    with pytest.raises(InvalidInput, match="chunk size"):
        chunks([1], 0)


@pytest.mark.parametrize("fmt,options", [
    ("llamafactory", {"max_pixels": 5000, "relative_paths": True}),  # images downscaled in tasks
    ("openai", {"granularity": "episode", "include_failed": True}),  # images embedded
])
def test_export_on_ray_writes_the_same_files(tmp_path, fmt, options):
    lake = build_lake(tmp_path / "lake")
    here = run_export(lake, ExportSpec(format=fmt, out=tmp_path / "here", **options))
    argv = ["--lake", str(lake.path), "export", "sft", "--format", fmt, "--out",
            str(tmp_path / "ray"), "--ray", "--json"]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    assert main(argv) == 0
    there = tree(tmp_path / "ray")
    assert there == tree(tmp_path / "here") if options.get("relative_paths") else \
        there.keys() == tree(tmp_path / "here").keys()
    assert here.samples["train"] > 0
    lake.invalidate()
    exports = lake.sql("SELECT status, samples FROM exports ORDER BY created_at").to_pylist()
    assert [e["status"] for e in exports] == ["finished", "finished"]
    assert exports[0]["samples"] == exports[1]["samples"]


def grouped_lake(path, **recorder) -> Lake:
    """Three groups of two episodes; a group's episodes show the same screens under
    different clocks. By default recorded without perceptual hashes or keys, as an import
    would be."""
    lake = Lake(path)
    with Recorder(lake, **(recorder or {"anchor": None, "image_checks": "structure"})) as rec:
        for g in range(3):
            for e in range(2):
                with rec.start_episode(f"task-{g}", "Goal", episode_id=f"ep-{g}-{e}",
                                       group_id=f"g{g}") as ep:
                    for n in range(3):
                        ep.log_step(screenshot(10 * g + n % 2, clock=f"12:0{e}"),
                                    response(coordinate=[n, n]))
                    ep.finish(success=True)
    lake.invalidate()
    return lake


def keys(lake: Lake) -> list[dict]:
    lake.invalidate()
    return lake.sql("SELECT episode_id, step, anchor_key, image_phash FROM steps "
                    "ORDER BY episode_id, step").to_pylist()


def test_rekey_on_ray_gives_the_recorders_keys(tmp_path):
    here = grouped_lake(tmp_path / "here")
    shutil.copytree(here.path, tmp_path / "ray")
    there = Lake(tmp_path / "ray")
    assert {r["anchor_key"] for r in keys(here)} == {None}

    report = rekey_anchors(here)
    assert (report.groups, report.steps, report.hashed, report.changed) == (3, 18, 18, 18)
    assert main(["--lake", str(there.path), "rekey", "--ray"]) == 0
    assert keys(there) == keys(here)

    # what the recorder's own keyer gives when it records the same steps
    recorded = grouped_lake(tmp_path / "recorded", image_checks="decode")
    assert keys(recorded) == keys(here)
    per_group = {(r["episode_id"][:4], r["anchor_key"]) for r in keys(here)}
    assert len(per_group) == 6  # two screens per group, shared by its episodes across clocks

    again = rekey_anchors(here, where="group_id = 'g0'", threshold=63)
    assert (again.groups, again.steps, again.hashed) == (1, 6, 0)
    assert len({r["anchor_key"] for r in keys(here) if r["episode_id"].startswith("ep-0")}) == 1
