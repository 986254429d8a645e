"""SFT export: 10,000 steps of 1080x2400 PNG screenshots to each format, vs a naive exporter.

The lake is built with the LakeWriter directly: a handful of realistic screens, each step's
PNG made unique (a tEXt chunk with the step number, no re-encoding) so that content
addressing cannot collapse them. Every format exports the same selection with the same
options. The baseline is what a script over the lake would do without this exporter: per
sample, read the step's rows and images with SQL, decode and re-encode every image of the
sample (as the reference's save function does) and write it out (a file per occurrence for
the path formats, embedded bytes for trl/openai). The baseline runs on a prefix of the
samples; its rate is per sample. Output MB/s counts the bytes each side writes.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import shutil
import struct
import time
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from common import line, workdir
from PIL import Image
from screens import phone_screen

from episodelake.lake import Lake, LakeWriter, WriterOptions
from episodelake.lake.export import FORMATS, ExportSpec, run_export
from episodelake.lake.vocab.families import parse_response

RESPONSE = ('<thinking>Open the settings list and find entry {n}.</thinking>\n<tool_call>\n'
            '{{"name": "mobile_use", "arguments": {{"action": "click", "coordinate": [540, {y}]}}}}\n</tool_call>')


def unique_png(png: bytes, n: int) -> bytes:
    """`png` with a tEXt chunk after IHDR: same pixels, different bytes, valid PNG."""
    data = b"elake\x00" + str(n).encode()
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    return png[:33] + chunk + png[33:]


def build_lake(path: Path, steps: int, per_episode: int, tasks: int, screens: int) -> tuple[Lake, float]:
    bases = [phone_screen(s) for s in range(screens)]
    t0 = datetime(2026, 5, 1, tzinfo=UTC)
    with LakeWriter(path, WriterOptions(batch_rows=1024)) as writer:
        for e in range(steps // per_episode):
            eid = f"ep-{e:05d}"
            writer.append("episodes", {"episode_id": eid, "task_name": f"task-{e % tasks:03d}",
                                       "task_goal": f"Change setting {e % tasks} to its other value",
                                       "env": "bench", "status": "finished", "success": True,
                                       "created_at": t0 + timedelta(seconds=e), "episode_length": per_episode})
            rows = []
            for n in range(per_episode):
                k = e * per_episode + n
                image = unique_png(bases[k % screens], k)
                response = RESPONSE.format(n=n, y=200 + 40 * n)
                rows.append({"episode_id": eid, "step": n, "timestamp": t0 + timedelta(seconds=e, milliseconds=n),
                             "image": image, "image_format": "png",
                             "image_sha256": hashlib.sha256(image).hexdigest(), "width": 1080, "height": 2400,
                             "model_response": response, "step_reward": 1.0,
                             **parse_response(response).to_row()})
            writer.append_rows("steps", rows)
    lake = Lake(path)
    return lake, sum(len(b) for b in bases) / len(bases) / 1e6


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def reencode(data: bytes) -> bytes:
    out = io.BytesIO()
    Image.open(io.BytesIO(data)).save(out, format="PNG")
    return out.getvalue()


def baseline(lake: Lake, out: Path, fmt: str, samples: int, history_images: int) -> tuple[float, int]:
    """(samples/s, bytes written) of the naive export of the first `samples` step samples."""
    out.mkdir()
    episodes = [r["episode_id"] for r in lake.sql("SELECT episode_id FROM episodes ORDER BY episode_id").to_pylist()]
    written, done = 0, 0
    t = time.perf_counter()
    with open(out / "train.jsonl", "w") as fh:
        for eid in episodes:
            rows = lake.sql("SELECT step, image, model_response FROM steps WHERE episode_id = ? ORDER BY step",
                            [eid]).to_pylist()
            for i, row in enumerate(rows):
                shown = rows[max(0, i - history_images):i + 1]
                images = []
                for r in shown:
                    png = reencode(r["image"])
                    if fmt in ("trl", "openai"):
                        images.append(base64.b64encode(png).decode())
                    else:
                        path = out / f"{eid}_{i}_{r['step']}.png"
                        path.write_bytes(png)
                        written += len(png)
                        images.append(path.name)
                record = json.dumps({"messages": [{"role": "user", "content": "<image>" * len(images)},
                                                  {"role": "assistant", "content": row["model_response"]}],
                                     "images": images})
                fh.write(record + "\n")
                written += len(record) + 1
                done += 1
                if done == samples:
                    return done / (time.perf_counter() - t), written
    return done / (time.perf_counter() - t), written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--per-episode", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--screens", type=int, default=6, help="distinct base screenshots drawn")
    ap.add_argument("--history-images", type=int, default=1,
                    help="screenshots of earlier steps per sample (default 1; the exporter's default is 3)")
    ap.add_argument("--baseline-samples", type=int, default=20)
    ap.add_argument("--formats", default=",".join(FORMATS))
    args = ap.parse_args()
    with workdir("export") as d:
        t = time.perf_counter()
        lake, mb_per_image = build_lake(d / "lake", args.steps, args.per_episode, args.tasks, args.screens)
        line("export: lake built", steps=args.steps, s=time.perf_counter() - t, MB_per_image=mb_per_image)
        for fmt in args.formats.split(","):
            out = d / f"out-{fmt}"
            spec = ExportSpec(format=fmt, out=out, history_images=args.history_images)
            t = time.perf_counter()
            result = run_export(lake, spec)
            elapsed = time.perf_counter() - t
            n = sum(result.samples.values())
            mb = folder_bytes(out) / 1e6
            base_rate, base_bytes = baseline(lake, d / f"base-{fmt}", fmt, args.baseline_samples, args.history_images)
            base_mb_s = base_bytes / 1e6 / (args.baseline_samples / base_rate)
            line(f"export {fmt}", samples=n, samples_s=n / elapsed, MB_s=mb / elapsed, MB=mb,
                 baseline_samples_s=base_rate, baseline_MB_s=base_mb_s,
                 ratio=f"{n / elapsed / base_rate:.0f}x")
            shutil.rmtree(out)
            shutil.rmtree(d / f"base-{fmt}")


if __name__ == "__main__":
    main()
