"""Each export format: loads with `datasets` (offline), has its documented shape, and keeps one
image per `<image>` token (or image part); the format registry is documented."""

from __future__ import annotations

import base64
import io
import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
datasets = pytest.importorskip("datasets")

from PIL import Image  # noqa: E402
from test_export import TASKS, build_lake, export, jsonl  # noqa: E402

from episodelake.collectors.clawgui import import_clawgui  # noqa: E402
from episodelake.lake import Lake  # noqa: E402
from episodelake.lake.export import FORMATS, formats  # noqa: E402

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
                assert (out / path).is_file() and not os.path.isabs(path)
    if fmt == "llamafactory":
        info = json.loads((out / "dataset_info.json").read_text())
        assert set(info) == {"episodelake_train", "episodelake_val"}
        entry = info["episodelake_train"]
        assert entry["formatting"] == "sharegpt" and entry["file_name"] == "train.jsonl"
        assert entry["columns"] == {"messages": "messages", "images": "images"}
        assert entry["tags"]["system_tag"] == "system"


def test_trl_parquet_loads_with_images_embedded_as_content_parts(lake, tmp_path):
    out = tmp_path / "out"
    result = export(lake, out, "trl", val_fraction=0.3)
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
    assert set(FORMATS) == {"llamafactory", "swift", "trl", "openai", "clawgui"}
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
