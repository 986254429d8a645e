"""Training data straight from the lake: `sft_dataset` vs reading an export folder with PIL.

The lake holds 1080x2400 PNG screenshots (bench_export's builder: realistic screens, each
step's bytes unique). Both sides serve the same step samples (history 2, no processor, one
process): the dataset reads each sample's screenshots from the blob column and hands them
over as PIL images opened lazily (pixels decoded on first use); the baseline reads the
llamafactory export of the same selection (train.jsonl and its image files) with PIL, as a
training script over the folder would. Rows:

- `dataset` vs `folder decode`: the issue's target as worded, lazy images vs decoded
  ones (the work of decoding moves to whoever touches the pixels: a processor, a
  DataLoader worker);
- `dataset` vs `folder open`: equal work, both open the images without decoding;
- `dataset decode` vs `folder decode`: equal work, both decode every image (RGB).

Decoding rows run on a prefix of the samples (`--decode-samples`); rates are per sample.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench_export import build_lake
from common import line, workdir
from PIL import Image

from episodelake.lake.export import ExportSpec, run_export
from episodelake.trainer.data import sft_dataset


def folder_samples(out: Path) -> list[list[str]]:
    """Each exported sample's image paths, as a script over the folder reads them."""
    lines = []
    for split in ("train", "val"):
        path = out / f"{split}.jsonl"
        if path.exists():
            lines += [json.loads(text)["images"] for text in path.read_text(encoding="utf-8").splitlines()]
    return lines


def folder_rate(samples: list[list[str]], decode: bool) -> float:
    t = time.perf_counter()
    for paths in samples:
        for path in paths:
            with Image.open(path) as image:
                if decode:
                    image.convert("RGB")
                else:
                    image.size  # noqa: B018  (the header only, as the dataset's lazy images)
    return len(samples) / (time.perf_counter() - t)


def dataset_rate(lake, history: int, limit: int | None, decode: bool) -> tuple[float, int, int]:
    """(samples/s, samples, images) of one pass (or `limit` samples) over the dataset."""
    ds = sft_dataset(lake, history_images=history, seed=0)
    n = images = 0
    t = time.perf_counter()
    for sample in ds:
        for image in sample["images"]:
            if decode:
                image.convert("RGB")
            else:
                image.size  # noqa: B018
        images += len(sample["images"])
        n += 1
        if limit is not None and n == limit:
            break
    return n / (time.perf_counter() - t), n, images


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--per-episode", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--screens", type=int, default=6, help="distinct base screenshots drawn")
    ap.add_argument("--history-images", type=int, default=2)
    ap.add_argument("--decode-samples", type=int, default=60)
    args = ap.parse_args()
    with workdir("dataset") as d:
        t = time.perf_counter()
        lake, mb_per_image = build_lake(d / "lake", args.steps, args.per_episode, args.tasks, args.screens)
        line("dataset: lake built", steps=args.steps, s=time.perf_counter() - t, MB_per_image=mb_per_image)
        run_export(lake, ExportSpec(format="llamafactory", out=d / "export", history_images=args.history_images,
                                    val_fraction=0))
        exported = folder_samples(d / "export")
        rate, n, images = dataset_rate(lake, args.history_images, None, decode=False)
        assert n == len(exported), (n, len(exported))
        folder_open = folder_rate(exported, decode=False)
        folder_rate(exported[-3:], decode=True)  # warm up PIL's decoder, as the dataset's pass did
        folder_decode = folder_rate(exported[:args.decode_samples], decode=True)
        decoded, _, _ = dataset_rate(lake, args.history_images, args.decode_samples, decode=True)
        line("dataset vs folder decode", samples=n, images=images, dataset_samples_s=rate,
             folder_decode_samples_s=folder_decode, ratio=rate / folder_decode)
        line("dataset vs folder open", dataset_samples_s=rate, folder_open_samples_s=folder_open,
             ratio=rate / folder_open)
        line("dataset decode vs folder decode", dataset_decode_samples_s=decoded,
             folder_decode_samples_s=folder_decode, ratio=decoded / folder_decode)


if __name__ == "__main__":
    main()
