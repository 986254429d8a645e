"""Training data straight from the lake: `sft_dataset` vs reading the export folder, at equal work.

The lake holds 1080x2400 PNG screenshots (bench_export's builder: realistic screens, each
step's bytes unique). Both sides serve the same step samples (history 2: three screenshots
per sample but the first two of an episode) and do the same work per sample; the baseline
is the llamafactory export of the same selection (train.jsonl and its image files), read as
a training script over the folder reads it: each line's image files opened with PIL, one
sample at a time, in the file's order. Rows (all in one run):

- `rgb`: both hand over every image decoded to an RGB numpy array, no processor, one
  process. The dataset with `images="rgb"` and its defaults (blocks of 8 samples read with
  one take_blobs call, a screenshot decoded once while it stays in its 16-image cache,
  decoding on 2 threads, 16 samples prefetched on a thread), then with `decode_threads=1,
  prefetch=0` (the same decoding work, nothing in parallel); each in reading order
  (`shuffle_buffer=1`: episodes shuffled, steps in order, the locality of the folder's file
  order) and shuffled (`shuffle_buffer=1000`, the default).
- `processor`: both through the same Hugging Face processor (a tiny Qwen2-VL's tokenizer and
  image processor, built locally, nothing downloaded) into the same tensors
  (`trainer.data.processed`), batches of 4 from a DataLoader with 2 spawned workers: the
  dataset's `ds.loader(...)`, the folder's map-style Dataset in file order. samples/s over
  the run, and the time to the first batch from building the dataset object (the lake:
  selection, order; the folder: reading train.jsonl) to the first batch in hand.
- `undecoded` (labelled, not equal work unless both sides do the same): lazily opened PIL
  images on both sides, headers only.

Rates are per sample over a prefix of the samples (`--decode-samples`, `--processor-samples`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from bench_export import build_lake
from common import line, workdir
from PIL import Image
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.trainer.tiny_vlm

from episodelake.lake.export import ExportSpec, run_export  # noqa: E402
from episodelake.lake.export.samples import IMAGE_TOKEN, Sample  # noqa: E402
from episodelake.trainer.data import processed, sft_dataset  # noqa: E402

BATCH = 4
WORKERS = 2


def folder_lines(out: Path) -> list[dict]:
    """The export's lines, as a script over the folder reads them."""
    return [json.loads(text) for text in (out / "train.jsonl").read_text(encoding="utf-8").splitlines()]


def folder_sample(record: dict) -> Sample:
    """A line back into content parts (an image part where each <image> token was)."""
    messages = []
    for m in record["messages"]:
        if IMAGE_TOKEN not in m["content"]:
            messages.append({"role": m["role"], "content": m["content"]})
            continue
        parts: list[dict] = []
        for k, piece in enumerate(m["content"].split(IMAGE_TOKEN)):
            if k:
                parts.append({"type": "image", "image": None})
            if piece.strip("\n"):
                parts.append({"type": "text", "text": piece.strip("\n")})
        messages.append({"role": m["role"], "content": parts})
    return Sample("task", "folder", 0, messages, "")


def rgb(path: str) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


class FolderDataset(Dataset):
    """The export folder as a training script reads it: a map-style Dataset of its lines."""

    def __init__(self, out: Path, processor):
        self.lines = folder_lines(out)
        self.processor = processor

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int) -> dict:
        record = self.lines[index]
        images = []
        for path in record["images"]:
            with Image.open(path) as image:
                images.append(image.convert("RGB"))
        return processed(self.processor, folder_sample(record), images)


class TinyProcessor:
    """A tiny Qwen2-VL's tokenizer and image processor behind the processor interface
    (transformers' Qwen2VLProcessor needs torchvision, which this install leaves out); the
    same one as tests/trainer/test_data.py's."""

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


def collate(batch: list[dict]) -> dict:
    """Pads as `LakeSftDataset.collate` does (the folder side's collate_fn, picklable)."""
    import torch

    width = max(len(item["input_ids"]) for item in batch)
    out = {}
    for key in batch[0]:
        values = [item[key] for item in batch]
        if all(v.dim() == 1 and len(v) == len(item["input_ids"]) for v, item in zip(values, batch, strict=True)):
            fill = -100 if key == "labels" else 0
            out[key] = torch.stack([torch.nn.functional.pad(v, (0, width - len(v)), value=fill) for v in values])
        else:
            out[key] = torch.cat(values)
    return out


def folder_rgb_rate(lines: list[dict], limit: int) -> float:
    t = time.perf_counter()
    for record in lines[:limit]:
        [rgb(path) for path in record["images"]]
    return min(limit, len(lines)) / (time.perf_counter() - t)


def folder_open_rate(lines: list[dict]) -> float:
    t = time.perf_counter()
    for record in lines:
        for path in record["images"]:
            with Image.open(path) as image:
                image.size  # noqa: B018  (the header only)
    return len(lines) / (time.perf_counter() - t)


def dataset_rate(lake, history: int, limit: int | None, **options) -> tuple[float, int, dict]:
    """(samples/s, samples, cache counts) of one pass (or `limit` samples) over the dataset."""
    ds = sft_dataset(lake, history_images=history, seed=0, **options)
    n = 0
    t = time.perf_counter()
    for sample in ds:
        if options.get("images") != "rgb":
            for image in sample["images"]:
                image.size  # noqa: B018
        n += 1
        if limit is not None and n == limit:
            break
    rate = n / (time.perf_counter() - t)
    reader = ds.reader
    return rate, n, {"decoded": reader.cache.misses, "reused": reader.cache.hits, "take_blobs": reader.calls}


def first_and_rate(make, limit: int) -> tuple[float, float]:
    """(seconds from `make()` to the first batch, samples/s over `limit` samples after it)."""
    t0 = time.perf_counter()
    loader = make()
    n = 0
    first = rate_start = None
    for batch in loader:
        if first is None:
            first = rate_start = time.perf_counter()
            first -= t0
            continue  # the rate is measured after the first batch (the workers are up)
        n += len(batch["input_ids"])
        if n >= limit:
            break
    assert first is not None and rate_start is not None
    return first, n / (time.perf_counter() - rate_start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--per-episode", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--screens", type=int, default=6, help="distinct base screenshots drawn")
    ap.add_argument("--history-images", type=int, default=2)
    ap.add_argument("--decode-samples", type=int, default=200)
    ap.add_argument("--processor-samples", type=int, default=120)
    ap.add_argument("--skip-processor", action="store_true")
    args = ap.parse_args()
    with workdir("dataset") as d:
        t = time.perf_counter()
        lake, mb_per_image = build_lake(d / "lake", args.steps, args.per_episode, args.tasks, args.screens)
        line("dataset: lake built", steps=args.steps, s=time.perf_counter() - t, MB_per_image=mb_per_image)
        run_export(lake, ExportSpec(format="llamafactory", out=d / "export", history_images=args.history_images,
                                    val_fraction=0))
        lines = folder_lines(d / "export")
        h, limit = args.history_images, args.decode_samples

        folder_rgb_rate(lines[-3:], 3)  # warm up PIL's decoder
        folder = folder_rgb_rate(lines, limit)
        for label, order in (("in order", {"shuffle_buffer": 1}), ("shuffled", {})):
            rate, n, cache = dataset_rate(lake, h, limit, images="rgb", **order)
            single, _, _ = dataset_rate(lake, h, limit, images="rgb", decode_threads=1, prefetch=0, **order)
            line(f"rgb {label}", samples=n, dataset_samples_s=rate, one_thread_samples_s=single,
                 folder_samples_s=folder, ratio=rate / folder, one_thread_ratio=single / folder, **cache)
        folder_again = folder_rgb_rate(lines, limit)
        line("rgb folder again (drift)", folder_samples_s=folder_again, first_over_again=folder / folder_again)

        if not args.skip_processor:
            from tests.trainer.tiny_vlm import build_tiny_vlm

            processor = TinyProcessor(build_tiny_vlm(d / "tiny-vlm"))
            n = args.processor_samples

            def folder_loader():
                ds = FolderDataset(d / "export", processor)
                return DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, collate_fn=collate,
                                  multiprocessing_context="spawn")

            def lake_loader(**order):
                def make():
                    ds = sft_dataset(lake, history_images=h, seed=0, processor=processor, **order)
                    return ds.loader(batch_size=BATCH, num_workers=WORKERS, multiprocessing_context="spawn")
                return make

            folder_first, folder_rate = first_and_rate(folder_loader, n)
            for label, order in (("in order", {"shuffle_buffer": 1}), ("shuffled", {})):
                first, rate = first_and_rate(lake_loader(**order), n)
                line(f"processor 2 workers {label}", batch=BATCH, dataset_samples_s=rate, folder_samples_s=folder_rate,
                     ratio=rate / folder_rate, dataset_first_batch_s=first, folder_first_batch_s=folder_first,
                     first_batch_ratio=first / folder_first)
            folder_first2, folder_rate2 = first_and_rate(folder_loader, n)
            line("processor folder again (drift)", folder_samples_s=folder_rate2, folder_first_batch_s=folder_first2)

        rate, n, _ = dataset_rate(lake, h, None)
        assert n == len(lines), (n, len(lines))
        opened = folder_open_rate(lines)
        line("undecoded (headers only, both)", samples=n, dataset_samples_s=rate, folder_samples_s=opened,
             ratio=rate / opened)


if __name__ == "__main__":
    main()
