"""Ingest: 1080x2400 PNG steps through the Recorder vs the reference folder's write pattern,
and the enrichment that derives what recording no longer computes.

Two recorder modes are measured: the default (`structure` checks: chunks and CRCs, sha256,
the parsed action; the perceptual hash and anchor key are left to the recorder's background
worker, which runs beside the recording at a lower priority and is stopped at close) and
`decode` (full decode, perceptual hash and anchor key per step on the write path).

Baseline (the reference's save function, per step): decode the base64 PNG, decode and
re-encode it with Pillow, write it, then re-read and rewrite the whole episode.json. Both
sides receive base64 text, as the reference's rollout does. The disk's raw sequential write
speed (fsync'd) is measured in the same run for the bandwidth ratio.

Enrichment throughput is measured apart, in one process (one core), on steps whose
screenshots are all distinct (the 20 screens, each step's bytes made unique by a text chunk,
as a moving status-bar clock makes them): reading the blobs, decoding, hashing and committing.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import struct
import time
import zlib
from datetime import datetime

from common import line, workdir
from PIL import Image
from screens import phone_screen

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.derive.derivations import Scope, derivations, fill


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


def distinct(png: bytes, k: int) -> bytes:
    """The same pixels with different bytes: a text chunk before IEND (CRC right)."""
    body = b"Comment\x00" + str(k).encode()
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    return png[:-12] + chunk + png[-12:]


def enrichment_rates(folder, screens: list[bytes], steps: int, what: str) -> tuple[float, float]:
    """(steps per second, steps per CPU second) of one process filling `what` for `steps`
    steps with distinct screenshots. The second is the rate of one core however loaded the
    machine is (every thread of the process counted)."""
    lake = Lake(folder)
    with Recorder(lake, background_enrich=False) as rec:
        ep = rec.start_episode("task", "goal", group_id="g")
        for n in range(steps):
            ep.log_step(distinct(screens[n % len(screens)], n), RESPONSE)
        ep.finish(success=True)
    t, cpu = time.perf_counter(), time.process_time()
    report = fill(lake, derivations([what]), Scope())
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    assert report.steps[what] == steps, report
    return steps / elapsed, steps / cpu


RESPONSE = ('<thinking>Open the settings list and find the entry.</thinking>\n<tool_call>\n'
            '{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [540, 1200]}}\n</tool_call>')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--image-checks", choices=("default", "decode", "both"), default="both",
                    help="default: structure checks, hash and key derived in the background")
    ap.add_argument("--enrich-steps", type=int, default=200,
                    help="steps (distinct screenshots) for the enrichment throughput; 0 skips it")
    ap.add_argument("--baseline-episodes", type=int, default=10,
                    help="episodes for the (slow) baseline; its rate is per step")
    args = ap.parse_args()
    pngs = [phone_screen(s) for s in range(args.steps)]
    screens = [base64.b64encode(png).decode() for png in pngs]
    mb_per_step = sum(len(png) for png in pngs) / len(pngs) / 1e6
    with workdir("ingest") as d:
        disk = raw_disk_mb_s(d)

        t = time.perf_counter()
        for e in range(args.baseline_episodes):
            for n in range(args.steps):
                reference_save(d / "ref", screens[n], RESPONSE, "task", f"ep{e}", n)
        base_rate = args.baseline_episodes * args.steps / (time.perf_counter() - t)

        results, keyed = {}, 0
        modes = ("default", "decode") if args.image_checks == "both" else (args.image_checks,)
        for mode in modes:
            checks = "structure" if mode == "default" else mode
            t = time.perf_counter()
            with Recorder(Lake(d / f"lake-{mode}"), env="bench", image_checks=checks) as rec:
                for e in range(args.episodes):
                    ep = rec.start_episode("task", "goal", group_id=f"g{e // 8}")
                    for n in range(args.steps):
                        ep.log_step(screens[n], RESPONSE, reward=0.0)
                    ep.finish(success=e % 2 == 0, eval_score=float(e % 2 == 0))
            results[mode] = args.episodes * args.steps / (time.perf_counter() - t)
            if rec.enricher is not None:  # what its worker keyed while the recording went on
                keyed = rec.enricher.report.steps.get("phash", 0)
        enrich_rates = {what: enrichment_rates(d / f"enrich-{what}", pngs, args.enrich_steps, what)
                        for what in (("phash", "thumbs") if args.enrich_steps else ())}
    steps = args.episodes * args.steps
    line("ingest reference-folder baseline", steps_s=base_rate, MB_s=base_rate * mb_per_step)
    for mode, rate in results.items():
        extra = {"keyed_in_background": keyed} if mode == "default" else {}
        line(f"ingest recorder ({mode})", steps=steps, steps_s=rate, MB_s=rate * mb_per_step,
             vs_baseline=f"{rate / base_rate:.1f}x", disk_share=f"{rate * mb_per_step / disk:.0%}", **extra)
    line("ingest raw disk (fsync)", MB_s=disk)
    for what, (rate, per_cpu_s) in enrich_rates.items():
        line(f"enrichment {what}, one process, distinct 1080x2400 PNGs", steps=args.enrich_steps,
             steps_s=rate, steps_per_cpu_s=per_cpu_s)

if __name__ == "__main__":
    main()
