"""Ingest: 1080x2400 PNG steps through the Recorder vs the reference folder's write pattern.

Two recorder modes are measured: `decode` (the default: full decode, perceptual hash and
anchor key per step) and `structure` (chunk/CRC checks only, no perceptual hash).

Baseline (the reference's save function, per step): decode the base64 PNG, decode and
re-encode it with Pillow, write it, then re-read and rewrite the whole episode.json. Both
sides receive base64 text, as the reference's rollout does. The disk's raw sequential write
speed (fsync'd) is measured in the same run for the bandwidth ratio.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import time
from datetime import datetime

from common import line, workdir
from PIL import Image
from screens import phone_screen

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake


def raw_disk_mb_s(folder, total_mb: int = 256) -> float:
    block = os.urandom(4 * 1024 * 1024)
    path = folder / "raw.bin"
    t = time.perf_counter()
    with open(path, "wb") as fh:
        for _ in range(total_mb // 4):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    elapsed = time.perf_counter() - t
    path.unlink()
    return total_mb / elapsed


def reference_save(root, b64: str, response: str, task: str, eid: str, step: int) -> None:
    folder = root / task / eid
    (folder / "images").mkdir(parents=True, exist_ok=True)
    image = Image.open(io.BytesIO(base64.b64decode(b64)))
    path = folder / "images" / f"step_{step:04d}.png"
    image.save(path)  # decode + re-encode, as the reference does
    doc_path = folder / "episode.json"
    if doc_path.exists():
        doc = json.loads(doc_path.read_text())
    else:
        doc = {"meta_data": {"task_name": task, "task_goal": "goal", "episode_id": eid,
                             "created_at": datetime.now().isoformat()}, "episode": []}
    doc["episode"].append({"step": step, "image_path": str(path.resolve()), "model_response": response,
                           "timestamp": datetime.now().isoformat()})
    doc_path.write_text(json.dumps(doc, ensure_ascii=False, indent=2))


RESPONSE = ('<thinking>Open the settings list and find the entry.</thinking>\n<tool_call>\n'
            '{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [540, 1200]}}\n</tool_call>')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--image-checks", choices=("decode", "structure", "both"), default="both")
    ap.add_argument("--baseline-episodes", type=int, default=10,
                    help="episodes for the (slow) baseline; its rate is per step")
    args = ap.parse_args()
    screens = [base64.b64encode(phone_screen(s)).decode() for s in range(args.steps)]
    mb_per_step = sum(len(base64.b64decode(s)) for s in screens) / len(screens) / 1e6
    with workdir("ingest") as d:
        disk = raw_disk_mb_s(d)

        t = time.perf_counter()
        for e in range(args.baseline_episodes):
            for n in range(args.steps):
                reference_save(d / "ref", screens[n], RESPONSE, "task", f"ep{e}", n)
        base_rate = args.baseline_episodes * args.steps / (time.perf_counter() - t)

        results = {}
        modes = ("decode", "structure") if args.image_checks == "both" else (args.image_checks,)
        for mode in modes:
            t = time.perf_counter()
            with Recorder(Lake(d / f"lake-{mode}"), env="bench", image_checks=mode) as rec:
                for e in range(args.episodes):
                    ep = rec.start_episode("task", "goal", group_id=f"g{e // 8}")
                    for n in range(args.steps):
                        ep.log_step(screens[n], RESPONSE, reward=0.0)
                    ep.finish(success=e % 2 == 0, eval_score=float(e % 2 == 0))
            results[mode] = args.episodes * args.steps / (time.perf_counter() - t)
    steps = args.episodes * args.steps
    line("ingest reference-folder baseline", steps_s=base_rate, MB_s=base_rate * mb_per_step)
    for mode, rate in results.items():
        line(f"ingest recorder ({mode})", steps=steps, steps_s=rate, MB_s=rate * mb_per_step,
             vs_baseline=f"{rate / base_rate:.1f}x", disk_share=f"{rate * mb_per_step / disk:.0%}")
    line("ingest raw disk (fsync)", MB_s=disk)

if __name__ == "__main__":
    main()
