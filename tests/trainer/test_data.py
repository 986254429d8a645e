"""`sft_dataset`: the export's samples, sharded by episode, shuffled, resumable, processed.

Real lakes (Recorder -> Lance) in tmp folders; the comparison is with a real llamafactory
export of the same selection; the processor is a tiny Qwen2-VL's own tokenizer and image
processor (built offline, tests/trainer/tiny_vlm.py), and its tensors go through the model.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.curation import curation
from episodelake.lake.export.samples import with_image_tokens
from episodelake.lake.ops.lineage import lineage_of
from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.trainer.data import sft_dataset
from tests.lake.export.test_export import build_lake, export, jsonl, record


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    return build_lake(tmp_path_factory.mktemp("data") / "lake")


def _line(sample: dict) -> tuple[str, list[str]]:
    """A sample as the export writes it: messages with <image> tokens, images by sha256."""
    return (json.dumps(with_image_tokens(sample["messages"]), sort_keys=True), sample["image_sha256"])


@pytest.mark.parametrize("options", [
    {"history_images": 2, "include_failed": True},
    {"history_images": 0, "history_length": 1},
    {"granularity": "episode", "include_failed": True},
    {"where": "task_name IN ('task-1', 'task-2')", "good_steps_only": True},
])
def test_every_sample_is_the_llamafactory_exports(lake, tmp_path, options):
    export(lake, tmp_path / "out", "llamafactory", val_fraction=0, **options)
    lines = jsonl(tmp_path / "out" / "train.jsonl")
    expected = sorted((json.dumps(line["messages"], sort_keys=True), [Path(p).stem for p in line["images"]])
                      for line in lines)
    ds = sft_dataset(lake, seed=5, **options)
    got = [_line(sample) for sample in ds]
    assert len(ds) == len(got) == len(lines)
    assert sorted(got) == expected


def test_a_set_pinned_to_a_tag_reads_its_members_as_tagged(tmp_path):
    lake = build_lake(tmp_path / "lake", episodes_per_task=1, steps=2)
    lake.create_tag("v1")
    good = curation.create_set(lake, "good", kind="sft", pinned_tag="v1")
    for eid in ("ep-001", "ep-002"):
        curation.add_member(lake, good["set_id"], eid)
    export(lake, tmp_path / "out", "llamafactory", set="good", val_fraction=0)
    lines = jsonl(tmp_path / "out" / "train.jsonl")
    ds = sft_dataset(lake, set="good")
    assert sorted(_line(s) for s in ds) == sorted(
        (json.dumps(line["messages"], sort_keys=True), [Path(p).stem for p in line["images"]]) for line in lines)
    assert {s["episode_id"] for s in ds} == {"ep-001", "ep-002"}
    with pytest.raises(NotFound, match="set"):
        sft_dataset(lake, set="no-such-set")


def test_dataloader_workers_share_the_rank_without_overlap(lake):
    ds = sft_dataset(lake, include_failed=True, seed=2)
    whole = sorted(s["key"] for s in ds)
    loader = DataLoader(ds, batch_size=3, num_workers=2, collate_fn=ds.collate)
    assert sorted(s["key"] for batch in loader for s in batch["samples"]) == whole


def test_images_are_the_screenshots_decoded_lazily(lake):
    sample = next(iter(sft_dataset(lake, where="episode_id = 'ep-003' AND step = 2", history_images=2)))
    assert len(sample["images"]) == 3 and sample["step"] == 2
    steps = lake.steps("ep-003").to_pylist()
    assert sample["image_sha256"] == [steps[0]["image_sha256"], steps[1]["image_sha256"], steps[2]["image_sha256"]]
    image = sample["images"][-1]
    assert image._im is None  # opened, not yet decoded
    data, _ = lake.image("ep-003", 2)
    assert hashlib.sha256(data).hexdigest() == sample["image_sha256"][-1]
    assert image.convert("RGB").size == (108, 240)


def test_two_ranks_read_every_sample_exactly_once(lake):
    whole = [s["key"] for s in sft_dataset(lake, include_failed=True, history_images=2)]
    ranks = [[s["key"] for s in sft_dataset(lake, include_failed=True, history_images=2, rank=r,
                                             world_size=2, seed=9)] for r in range(2)]
    assert all(ranks) and sorted(ranks[0] + ranks[1]) == sorted(whole)
    assert not set(ranks[0]) & set(ranks[1])
    episodes = [{s["episode_id"] for s in sft_dataset(lake, include_failed=True, rank=r, world_size=2,
                                                      seed=9)} for r in range(2)]
    assert not episodes[0] & episodes[1]  # sharded by episode: no episode on two ranks


def test_order_is_stable_for_a_seed_and_shuffled_by_another(lake):
    def keys(seed: int, buffer: int = 1000) -> list[str]:
        return [s["key"] for s in sft_dataset(lake, seed=seed, shuffle_buffer=buffer)]

    assert keys(1) == keys(1)
    assert keys(1) != keys(2) and sorted(keys(1)) == sorted(keys(2))
    # without a buffer, each episode's samples come together, in step order
    read = [(s["episode_id"], s["step"]) for s in sft_dataset(lake, seed=1, shuffle_buffer=1)]
    runs = [eid for i, (eid, _) in enumerate(read) if i == 0 or read[i - 1][0] != eid]
    assert len(runs) == len(set(runs))
    assert all(a[1] < b[1] for a, b in zip(read, read[1:], strict=False) if a[0] == b[0])


def test_resuming_yields_exactly_the_samples_not_yet_yielded(lake):
    full = [s["key"] for s in sft_dataset(lake, seed=3, shuffle_buffer=16)]
    ds = sft_dataset(lake, seed=3, shuffle_buffer=16)
    it = iter(ds)
    head = [next(it)["key"] for _ in range(11)]
    state = json.loads(json.dumps(ds.state_dict()))  # survives a checkpoint file
    again = sft_dataset(lake, seed=3, shuffle_buffer=16)
    again.load_state_dict(state)
    assert head + [s["key"] for s in again] == full
    other = sft_dataset(lake, seed=4, shuffle_buffer=16)
    with pytest.raises(InvalidInput, match="state"):
        other.load_state_dict(state)


def test_a_tag_or_a_steps_version_reads_the_lake_as_it_was(tmp_path):
    lake = build_lake(tmp_path / "lake", episodes_per_task=1, steps=2)
    before = len(sft_dataset(lake))
    version = lake.dataset("steps").version
    lake.create_tag("v1")
    with Recorder(lake, anchor=None) as rec:
        record(rec, "task-new", 2, seed=77, episode_id="ep-new")
    lake.invalidate()
    assert len(sft_dataset(lake)) == before + 2
    assert len(sft_dataset(lake, version="v1")) == before
    assert len(sft_dataset(lake, version=version)) == before
    with pytest.raises(NotFound, match="version"):
        sft_dataset(lake, version="no-such-tag")
    with pytest.raises(NotFound, match="version"):
        sft_dataset(lake, version=10_000)


def test_bad_arguments_are_named(lake):
    with pytest.raises(InvalidInput, match="rank"):
        sft_dataset(lake, rank=2, world_size=2)
    with pytest.raises(InvalidInput, match="world_size"):
        sft_dataset(lake, world_size=0)
    with pytest.raises(NotFound, match="selection"):
        sft_dataset(lake, where="task_name = 'no-such-task'")
    with pytest.raises(InvalidInput, match="processor"):
        sft_dataset(lake, processor="not a processor")
    with pytest.raises(InvalidInput, match="history_images"):
        sft_dataset(lake, history_images=-1)


def test_lineage_records_what_the_dataset_reads(tmp_path):
    lake = build_lake(tmp_path / "lake", episodes_per_task=1, steps=2)
    ds = sft_dataset(lake, where="task_name = 'task-3'", lineage="warmup-v1")
    (row,) = lineage_of(lake, "warmup-v1")
    assert row["kind"] == "dataset" and row["counts"]["samples"] == len(ds)
    assert row["episode_ids"] == sorted({s["episode_id"] for s in ds})
    assert row["lake_versions"]["steps"] == lake.dataset("steps").version
    assert row["selection"]["options"]["where"] == "task_name = 'task-3'"


# -- with a processor ---------------------------------------------------------------------------
class TinyProcessor:
    """The tiny Qwen2-VL's tokenizer and image processor behind the processor interface
    (`apply_chat_template`, `__call__(text=, images=)`): transformers' Qwen2VLProcessor
    itself needs torchvision for its video half, which this install leaves out."""

    def __init__(self, folder: Path):
        from transformers import AutoImageProcessor, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        self.image_processor = AutoImageProcessor.from_pretrained(folder, local_files_only=True)

    def apply_chat_template(self, messages, **kwargs):
        return self.tokenizer.apply_chat_template(messages, **kwargs)

    def __call__(self, text, images=None, return_tensors="pt"):
        vision = self.image_processor(images=images, return_tensors="pt")
        merge = self.image_processor.merge_size ** 2
        pieces = text[0].split("<|image_pad|>")
        expanded = pieces[0]
        for grid, piece in zip(vision["image_grid_thw"], pieces[1:], strict=True):
            expanded += "<|image_pad|>" * (int(grid.prod()) // merge) + piece
        tokens = self.tokenizer([expanded], return_tensors="pt", add_special_tokens=False)
        return {**tokens, "pixel_values": vision["pixel_values"], "image_grid_thw": vision["image_grid_thw"]}


def test_a_processor_gets_tensors_that_train_the_model(lake, tiny_vlm):
    from transformers import AutoModelForImageTextToText

    processor = TinyProcessor(tiny_vlm)
    ds = sft_dataset(lake, where="episode_id = 'ep-003'", history_images=1, processor=processor)
    model = AutoModelForImageTextToText.from_pretrained(tiny_vlm, local_files_only=True)
    image_token = model.config.image_token_id
    for item in ds:
        assert item["input_ids"].dim() == 1 and item["labels"].shape == item["input_ids"].shape
        trained = item["labels"] != -100
        assert 0 < int(trained.sum()) < len(item["labels"])
        assert not bool((item["input_ids"][trained] == image_token).any())  # only the answer
        ids = item["input_ids"][None]
        out = model(input_ids=ids, attention_mask=item["attention_mask"][None],
                    mm_token_type_ids=(ids == image_token).long(), pixel_values=item["pixel_values"],
                    image_grid_thw=item["image_grid_thw"], labels=item["labels"][None])
        assert torch.isfinite(out.loss)
    items = list(ds)[:3]
    batch = ds.collate(items)  # samples of different lengths, padded
    assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape
    assert batch["input_ids"].shape[0] == 3
    assert batch["image_grid_thw"].shape[0] == sum(item["image_grid_thw"].shape[0] for item in items)
    assert bool((batch["labels"][batch["attention_mask"] == 0] == -100).all())
    out = model(**batch, mm_token_type_ids=(batch["input_ids"] == image_token).long())
    assert torch.isfinite(out.loss)


def test_a_processor_that_refuses_an_image_is_named(lake, tiny_vlm):
    class Refusing(TinyProcessor):
        def __call__(self, text, images=None, return_tensors="pt"):
            raise ValueError("image too small")

    ds = sft_dataset(lake, where="episode_id = 'ep-003'", processor=Refusing(tiny_vlm))
    with pytest.raises(InvalidInput, match="processor: Refusing refused the sample of episode ep-003"):
        next(iter(ds))


# -- workers, resuming, reading -----------------------------------------------------------------
def _keys(batches) -> list[str]:
    return [s["key"] for batch in batches for s in batch["samples"]]


def test_loader_workers_keep_the_single_process_order(lake):
    ds = sft_dataset(lake, include_failed=True, seed=2, shuffle_buffer=16)
    single = [s["key"] for s in ds]
    assert _keys(ds.loader(batch_size=3, num_workers=2)) == single  # worker k mod 2 reads batch k
    assert _keys(ds.loader(batch_size=5)) == single
    state = ds.state_dict()
    assert state["yielded"] == len(single) == len(ds)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_resuming_with_two_workers_yields_exactly_the_rest(lake, context):
    full = [s["key"] for s in sft_dataset(lake, include_failed=True, seed=3, shuffle_buffer=16)]
    ds = sft_dataset(lake, include_failed=True, seed=3, shuffle_buffer=16)
    head = []
    for k, batch in enumerate(ds.loader(batch_size=3, num_workers=2, multiprocessing_context=context)):
        head += [s["key"] for s in batch["samples"]]
        if k == 3:  # the workers have prefetched further: the state counts what reached this loop
            break
    state = json.loads(json.dumps(ds.state_dict()))  # survives a checkpoint file
    assert state["yielded"] == 12 and state["workers"]["yielded"] == [6, 6]
    again = sft_dataset(lake, include_failed=True, seed=3, shuffle_buffer=16)
    again.load_state_dict(state)
    rest = _keys(again.loader(batch_size=3, num_workers=2, multiprocessing_context=context))
    assert head + rest == full
    # the position does not depend on the workers: resume with none, another batch size
    once_more = sft_dataset(lake, include_failed=True, seed=3, shuffle_buffer=16)
    once_more.load_state_dict(state)
    assert head + _keys(once_more.loader(batch_size=4)) == full


def test_a_plain_dataloaders_workers_cannot_save_or_resume_a_position(lake):
    ds = sft_dataset(lake, include_failed=True, seed=2)
    for _ in DataLoader(ds, batch_size=3, num_workers=2, collate_fn=ds.collate):
        break
    with pytest.raises(InvalidInput, match="num_workers: this dataset was iterated by the workers of a plain"):
        ds.state_dict()
    assert len(_keys(ds.loader(batch_size=3))) == len(ds)  # a counted pass: the position is known again
    assert ds.state_dict()["yielded"] == len(ds)
    fresh = sft_dataset(lake, include_failed=True, seed=2)
    it = iter(fresh)
    next(it)
    state = fresh.state_dict()
    resumed = sft_dataset(lake, include_failed=True, seed=2)
    resumed.load_state_dict(state)
    with pytest.raises(InvalidInput, match="num_workers: a resumed position cannot be kept by 2 workers"):
        next(iter(DataLoader(resumed, batch_size=3, num_workers=2, collate_fn=resumed.collate)))
    # one plain worker keeps it (its order is the single process's); the next epoch starts afresh
    one = sft_dataset(lake, include_failed=True, seed=2)
    one.load_state_dict(state)
    rest = _keys(DataLoader(one, batch_size=3, num_workers=1, collate_fn=one.collate))
    whole = [s["key"] for s in sft_dataset(lake, include_failed=True, seed=2)]
    assert whole[:1] + rest == whole
    one.set_epoch(1)
    assert len(_keys(DataLoader(one, batch_size=3, num_workers=1, collate_fn=one.collate))) == len(one)


def test_a_state_of_another_dataset_seed_or_epoch_is_refused_naming_it(lake):
    ds = sft_dataset(lake, seed=3, shuffle_buffer=16)
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    with pytest.raises(InvalidInput, match="seed: the state was saved by a dataset with seed=3"):
        sft_dataset(lake, seed=4, shuffle_buffer=16).load_state_dict(state)
    with pytest.raises(InvalidInput, match="shuffle_buffer: the state was saved"):
        sft_dataset(lake, seed=3, shuffle_buffer=8).load_state_dict(state)
    with pytest.raises(InvalidInput, match="state: it was saved by a dataset of another selection"):
        sft_dataset(lake, seed=3, shuffle_buffer=16, include_failed=True).load_state_dict(state)
    with pytest.raises(InvalidInput, match="state: not a saved position"):
        sft_dataset(lake, seed=3, shuffle_buffer=16).load_state_dict({"position": 3, "buffer": []})
    later = sft_dataset(lake, seed=3, shuffle_buffer=16)
    later.load_state_dict(state)
    later.set_epoch(1)
    with pytest.raises(InvalidInput, match=r"epoch: the loaded state is in epoch 0 .* ds.set_epoch\(0\)"):
        iter(later)
    with pytest.raises(InvalidInput, match="persistent_workers"):
        ds.loader(batch_size=2, num_workers=2, persistent_workers=True)


def test_rgb_images_are_decoded_once_per_screenshot_and_read_in_blocks(lake):
    from episodelake.trainer.data_read import BLOCK

    ds = sft_dataset(lake, include_failed=True, history_images=2, shuffle_buffer=1, images="rgb")
    got = list(ds)
    shas = {sha for s in got for sha in s["image_sha256"]}
    shown = sum(len(s["images"]) for s in got)
    assert shown > len(shas)  # history: screenshots shown again
    assert ds.reader.cache.misses == len(shas)  # each decoded once
    assert ds.reader.calls <= -(-len(got) // BLOCK)  # one take_blobs per block of samples
    sample = next(s for s in got if s["episode_id"] == "ep-003" and s["step"] == 2)
    data, _ = lake.image("ep-003", 2)
    import io

    import numpy as np
    from PIL import Image

    expected = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    assert sample["images"][-1].shape == (240, 108, 3) and (sample["images"][-1] == expected).all()
    assert not sample["images"][-1].flags.writeable  # shared by the samples that show it


def test_constructing_a_dataset_logs_no_index_warning(tmp_path, capfd):
    from episodelake.lake.storage import tables

    lake = build_lake(tmp_path / "lake", episodes_per_task=1, steps=2)
    for table in ("episodes", "steps"):  # key indexes, as `elake optimize` builds them
        tables.index_keys(lake.location, table)
    lake.invalidate()
    capfd.readouterr()
    for _ in range(2):
        ds = sft_dataset(lake, rank=0, world_size=2)
        list(ds)
    captured = capfd.readouterr()
    assert "not supported" not in captured.err + captured.out and "episode_id_idx" not in captured.err
