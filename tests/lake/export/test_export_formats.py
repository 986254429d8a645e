"""Each export format: loads with `datasets` (offline), has its documented shape, and keeps one
image per `<image>` token (or image part); the format registry is documented."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
datasets = pytest.importorskip("datasets", reason="each export is loaded with `datasets`, which is not installed: "
                                                 "pip install -e '.[dev]'")

from PIL import Image  # noqa: E402

from episodelake.api import cli  # noqa: E402
from episodelake.collectors.clawgui.importer import import_clawgui  # noqa: E402
from episodelake.collectors.record.recorder import Recorder  # noqa: E402
from episodelake.lake import Lake  # noqa: E402
from episodelake.lake.export import FORMATS, ExportSpec, formats  # noqa: E402
from episodelake.lake.export.formats import checked  # noqa: E402
from episodelake.lake.export.samples import episode_chunks  # noqa: E402
from episodelake.lake.storage.errors import InvalidInput  # noqa: E402
from tests.lake.export.test_export import TASKS, build_lake, export, jsonl, record  # noqa: E402

SIZE = (108, 240)  # the factories' screenshot size


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    return build_lake(tmp_path_factory.mktemp("formats") / "lake")


def load(builder: str, folder, suffix: str, cache) -> datasets.DatasetDict:
    files = {s: str(folder / f"{s}.{suffix}") for s in ("train", "val") if (folder / f"{s}.{suffix}").exists()}
    return datasets.load_dataset(builder, data_files=files, cache_dir=str(cache))


def image_tokens(messages: list[dict]) -> int:
    return sum(m["content"].count("<image>") for m in messages)


@pytest.mark.parametrize("fmt", ["llamafactory", "swift"])
def test_token_formats_load_and_keep_one_image_per_token(lake, tmp_path, fmt):
    out = tmp_path / "out"
    result = export(lake, out, fmt, val_fraction=0.3)
    ds = load("json", out, "jsonl", tmp_path / "hf")
    assert {s: ds[s].num_rows for s in ds} == result.samples
    for split in ds:
        for row in ds[split]:
            assert set(row) == {"messages", "images"}
            assert [m["role"] for m in row["messages"]][:2] == ["system", "user"]
            assert row["messages"][-1]["role"] == "assistant"
            assert image_tokens(row["messages"]) == len(row["images"]) >= 1
            for path in row["images"]:
                assert os.path.isabs(path) and Path(path).is_file()
                assert Path(path).is_relative_to(out.resolve())
    if fmt == "llamafactory":
        info = json.loads((out / "dataset_info.json").read_text())
        assert set(info) == {"episodelake_train", "episodelake_val"}
        entry = info["episodelake_train"]
        assert entry["formatting"] == "sharegpt" and entry["file_name"] == "train.jsonl"
        assert entry["columns"] == {"messages": "messages", "images": "images"}
        assert entry["tags"]["system_tag"] == "system"


def test_trl_parquet_loads_with_images_embedded_as_content_parts(lake, tmp_path, monkeypatch):
    out = tmp_path / "out"
    result = export(lake, out, "trl", val_fraction=0.3)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # embedded images need no working directory
    ds = load("parquet", out, "parquet", tmp_path / "hf")
    assert {s: ds[s].num_rows for s in ds} == result.samples
    assert isinstance(ds["train"].features["images"].feature, datasets.Image)
    assert not (out / "images").exists()
    for row in ds["train"].select(range(10)):
        parts = [p for m in row["messages"] for p in m["content"]]
        assert all(isinstance(m["content"], list) for m in row["messages"])
        assert sum(p["type"] == "image" for p in parts) == len(row["images"]) >= 1
        assert all(p["text"] for p in parts if p["type"] == "text")
        assert all(img.size == SIZE for img in row["images"])


def test_openai_jsonl_inlines_images_as_data_urls(lake, tmp_path):
    out = tmp_path / "out"
    result = export(lake, out, "openai", val_fraction=0.3, history_images=1)
    ds = load("json", out, "jsonl", tmp_path / "hf")
    assert {s: ds[s].num_rows for s in ds} == result.samples
    for line in jsonl(out / "train.jsonl")[:10]:
        assert set(line) == {"messages"}
        urls = [p["image_url"]["url"] for m in line["messages"] for p in m["content"] if p["type"] == "image_url"]
        assert 1 <= len(urls) <= 2
        for url in urls:
            head, data = url.split(",", 1)
            assert head == "data:image/png;base64"
            assert Image.open(io.BytesIO(base64.b64decode(data))).size == SIZE


def test_clawgui_folders_import_back_into_a_lake(lake, tmp_path):
    out = tmp_path / "out"
    result = export(lake, out, "clawgui", val_fraction=0.3)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "train", "val"]
    copy = Lake(tmp_path / "copy")
    report = import_clawgui(copy, out / "train", progress=False)
    assert not report.skipped and not report.missing_images
    assert report.episodes == len(result.manifest["tasks"]["train"]) * 2 + (
        "task-1" in result.manifest["tasks"]["train"])
    tasks = {r["task_name"] for r in copy.sql("SELECT DISTINCT task_name FROM episodes").to_pylist()}
    assert tasks == set(result.manifest["tasks"]["train"])


def test_every_format_is_documented(capsys):
    from episodelake.api import cli

    assert cli.main(["export", "sft", "--list-formats"]) == 0
    listing = capsys.readouterr().out
    assert set(FORMATS) == {"llamafactory", "swift", "trl", "openai", "clawgui", "dpo", "prm"}
    for name, fmt in FORMATS.items():
        assert fmt.summary.strip() and len(fmt.doc.strip().splitlines()) >= 3, name
        assert f"``{name}``" in formats.__doc__, f"{name} is missing from the registry's docstring"
        assert f"{name}: {fmt.summary}" in listing


def test_registering_needs_a_fresh_name_and_docs():
    from episodelake.lake.export import ExportFormat, register

    with pytest.raises(ValueError, match="already registered"):
        register(FORMATS["swift"])
    with pytest.raises(ValueError, match="summary and doc"):
        register(ExportFormat(name="bare", summary="", doc="", open=FORMATS["swift"].open))


def test_all_tasks_are_exported_somewhere(lake, tmp_path):
    result = export(lake, tmp_path / "out", "swift", val_fraction=0.5, seed=1)
    assert sorted(result.manifest["tasks"]["train"] + result.manifest["tasks"]["val"]) == TASKS


# -- image paths that work from any working directory ---------------------------------------------
@pytest.mark.parametrize("fmt", ["llamafactory", "swift"])
def test_image_paths_open_from_any_working_directory(lake, tmp_path, monkeypatch, fmt):
    out = tmp_path / "out"
    result = export(lake, out, fmt, val_fraction=0.3)
    assert result.manifest["spec"]["relative_paths"] is False
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # not the export folder, as a trainer's would be
    ds = load("json", out, "jsonl", tmp_path / "hf")
    # what HF-based trainers (ms-swift, TRL) do with a path: open it as given, from the cwd
    ds = ds.cast_column("images", datasets.Sequence(datasets.Image()))
    opened = 0
    for split in ds:
        for row in ds[split]:
            for image in row["images"]:
                assert image.size == SIZE
                opened += 1
    assert opened >= sum(result.samples.values())


def test_relative_paths_are_relative_to_the_folder_and_say_so(lake, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    assert cli.main(["--lake", str(lake.path), "export", "sft", "--format", "swift", "--out", str(out),
                     "--relative-paths", "--where", "task_name = 'task-2'", "--val-fraction", "0"]) == 0
    printed = capsys.readouterr().out
    assert f"image paths: relative to {out.resolve()}" in printed and "ROOT_IMAGE_DIR" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spec"]["relative_paths"] is True
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    for line in jsonl(out / "train.jsonl"):
        for path in line["images"]:
            assert not os.path.isabs(path) and not Path(path).exists()  # not from another cwd...
            with Image.open(out / path) as image:  # ...but against the folder (ROOT_IMAGE_DIR)
                assert image.size == SIZE
    assert cli.main(["--lake", str(lake.path), "export", "sft", "--format", "trl", "--out",
                     str(tmp_path / "trl"), "--where", "task_name = 'task-2'"]) == 0
    assert "image paths" not in capsys.readouterr().out  # embedded: nothing to resolve


# -- at most 10 images per OpenAI example ----------------------------------------------------------
def test_episode_chunks_are_the_fewest_and_as_even_as_possible():
    assert episode_chunks(5, None) == [(0, 5)]
    assert episode_chunks(10, 10) == [(0, 10)]
    assert episode_chunks(11, 10) == [(0, 5), (5, 11)]
    assert episode_chunks(15, 10) == [(0, 7), (7, 15)]
    assert episode_chunks(21, 10) == [(0, 7), (7, 14), (14, 21)]
    assert episode_chunks(3, 1) == [(0, 1), (1, 2), (2, 3)]


def image_shas(line: dict) -> list[str]:
    return [hashlib.sha256(base64.b64decode(p["image_url"]["url"].split(",", 1)[1])).hexdigest()
            for m in line["messages"] for p in m["content"] if p["type"] == "image_url"]


def test_openai_examples_carry_at_most_10_images_and_every_step_once(tmp_path):
    lake = Lake(tmp_path / "lake")
    lengths = {"ep-15": 15, "ep-21": 21, "ep-10": 10, "ep-3": 3}
    with Recorder(lake, anchor=None) as rec:
        for seed, (episode_id, n) in enumerate(lengths.items()):
            record(rec, f"task-{seed}", n, seed=seed, episode_id=episode_id)
    lake.invalidate()
    out = tmp_path / "out"
    result = export(lake, out, "openai", granularity="episode", val_fraction=0)
    assert result.manifest["spec"]["max_images"] == 10
    lines = jsonl(out / "train.jsonl")
    assert result.samples["train"] == len(lines) == 2 + 3 + 1 + 1
    for seed, (episode_id, n) in enumerate(lengths.items()):
        steps = lake.steps(episode_id).to_pylist()
        mine = [line for line in lines if line["messages"][1]["content"][0]["text"]
                .startswith(f"Task: Goal of task-{seed}")]
        assert len(mine) == len(episode_chunks(n, 10))
        responses, shas = [], []
        for line in mine:
            assert len(image_shas(line)) <= 10
            assert line["messages"][0]["role"] == "system"
            assert [m["role"] for m in line["messages"][1:]] == ["user", "assistant"] * len(image_shas(line))
            intro = line["messages"][1]["content"][0]["text"]
            earlier = len(responses)  # the steps of earlier parts are listed as text
            assert ("Actions taken before the screenshots below" in intro) == (earlier > 0)
            assert intro.count("\n") == (earlier + 2 if earlier else 0)
            responses += [m["content"][0]["text"] for m in line["messages"] if m["role"] == "assistant"]
            shas += image_shas(line)
        # every step is an assistant turn exactly once, in order, shown with its own screenshot
        assert responses == [s["model_response"] for s in steps]
        assert shas == [s["image_sha256"] for s in steps]


def test_an_image_limit_is_refused_with_the_limit_named(tmp_path):
    with pytest.raises(InvalidInput, match="openai accepts at most 10 images per sample, not 11"):
        checked(ExportSpec(format="openai", out=tmp_path, max_images=11))
    with pytest.raises(InvalidInput, match="history_images: 10 .* 11 images per sample.*at most 10"):
        checked(ExportSpec(format="openai", out=tmp_path, history_images=10))
    assert checked(ExportSpec(format="openai", out=tmp_path, history_images=10, history_length=9)).max_images == 10
    assert checked(ExportSpec(format="swift", out=tmp_path, history_images=30)).max_images is None
    with pytest.raises(InvalidInput, match="max_images allows at most 4"):
        checked(ExportSpec(format="swift", out=tmp_path, max_images=4, history_images=4))
