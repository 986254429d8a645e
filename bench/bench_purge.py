"""Purging one episode from a grown lake: time and bytes rewritten against the lake's size,
and against a full rewrite of the steps table without the episode (the baseline, measured in
the same run on a copy of the same lake).

The lake: `--steps` steps in episodes of `--per-episode`, committed `--per-commit` steps at a
time as writers do (one fragment per commit), with a 360x800 PNG screenshot per step (unique
bytes each), and a tag in the middle, so the purge also re-creates a tag. The purge rewrites
only the fragments holding the episode (in the current version and the tag's), prunes the old
versions, and then proves it: every remaining version is read, and every file of the lake is
scanned for the screenshots' bytes and digests (`proof s`, part of the purge's time). A last
line purges the same episode after `elake optimize` compacted the steps into one fragment:
the worst case, where the fragment holding the episode is the whole table.

    python bench/bench_purge.py                     # 30,000 steps (a couple of minutes here)
    python bench/bench_purge.py --steps 300000      # the issue's size (about 5 GB of screenshots)
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import struct
import time
import zlib
from datetime import UTC, datetime, timedelta

import lance
import pyarrow as pa
from common import line, workdir
from screens import phone_screen

from episodelake.lake import Lake
from episodelake.lake.ops import purge
from episodelake.lake.storage import schema, tables

SIZE = (360, 800)


def unique(base: bytes, n: int) -> bytes:
    """`base` (a PNG) with a text chunk naming `n` before its end: a valid PNG of its own bytes."""
    data = b"step\x00" + str(n).encode()
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    return base[:-12] + chunk + base[-12:]


def build(lake: Lake, steps: int, per_episode: int, per_commit: int) -> list[str]:
    bases = [phone_screen(seed, SIZE) for seed in range(32)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = [f"ep-{i:06d}" for i in range(steps // per_episode)]
    lake.upsert("episodes", [{"episode_id": e, "run_id": "bench", "task_name": f"task-{i % 40}",
                              "task_goal": f"goal of episode {e} for a person", "status": "finished",
                              "success": i % 3 == 0, "episode_length": per_episode, "created_at": start}
                             for i, e in enumerate(ids)])
    rows: list[dict] = []
    tagged = False
    for n in range(len(ids) * per_episode):
        image = unique(bases[n % len(bases)], n)
        rows.append({"episode_id": ids[n // per_episode], "step": n % per_episode, "image": image,
                     "image_format": "png", "image_sha256": hashlib.sha256(image).hexdigest(),
                     "width": SIZE[0], "height": SIZE[1], "timestamp": start + timedelta(seconds=n),
                     "model_response": f"<tool_call>click {n}</tool_call>", "action_type": "click"})
        if len(rows) == per_commit:
            tables.commit(lake.location, "steps", schema.conform("steps", rows), "append")
            rows = []
            if not tagged and n + 1 >= (len(ids) * per_episode) // 2:
                lake.create_tag("half")
                tagged = True
    if rows:
        tables.commit(lake.location, "steps", schema.conform("steps", rows), "append")
    lake.invalidate()
    return ids


def full_rewrite(lake: Lake, episode_id: str) -> tuple[float, int]:
    """The baseline: the steps table written again whole without the episode."""
    ds = lake.dataset("steps")
    out = lake.path / "steps-rewritten.lance"
    started = time.perf_counter()
    scanner = ds.scanner(filter=f"episode_id != '{episode_id}'", blob_handling="all_binary",
                         columns=schema.TABLES["steps"].names, batch_size=256)
    target = schema.TABLES["steps"]
    batches = (pa.RecordBatch.from_arrays([b.column(n) for n in target.names], schema=target)
               for b in scanner.to_batches())
    lance.write_dataset(pa.RecordBatchReader.from_batches(target, batches), str(out), schema=target)
    elapsed = time.perf_counter() - started
    return elapsed, sum(f.stat().st_size for f in out.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--per-episode", type=int, default=10)
    parser.add_argument("--per-commit", type=int, default=1_000)
    parser.add_argument("--no-optimize", action="store_true", help="leave out the case after optimize "
                        "(a third copy of the lake on disk)")
    args = parser.parse_args()
    with workdir("purge") as folder:
        started = time.perf_counter()
        lake = Lake(folder / "lake")
        ids = build(lake, args.steps, args.per_episode, args.per_commit)
        shutil.copytree(folder / "lake", folder / "copy")
        if not args.no_optimize:
            shutil.copytree(folder / "lake", folder / "compacted")
        lake_bytes = sum(f.stat().st_size for f in (folder / "lake").rglob("*") if f.is_file())
        fragments = tables.fragment_count(lake.location, "steps")
        print(f"lake: {args.steps:,} steps in {len(ids):,} episodes, {fragments} steps fragments, "
              f"{lake_bytes / 1e6:,.0f} MB, tag 'half' (built in {time.perf_counter() - started:.0f} s)")
        victim = ids[len(ids) // 4]  # in the tag too
        t = time.perf_counter()
        report = purge.purge(lake, [victim])
        purge_s = time.perf_counter() - t
        assert report["proof"]["files_holding"] == 0 and report["rows_removed"]["steps"] == args.per_episode
        base_s, base_bytes = full_rewrite(Lake(folder / "copy"), victim)
        rewritten = report["bytes_rewritten"]
        line("bench_purge one episode", steps=f"{args.steps:,}", lake_MB=lake_bytes / 1e6,
             purge_s=purge_s, proof_s=report["proof_s"],
             steps_fragments=f"{report['fragments_rewritten']['steps']} of {fragments}",
             rewritten_MB=rewritten / 1e6, share_of_lake=f"{100 * rewritten / lake_bytes:.2f}%")
        line("bench_purge baseline full rewrite", rewrite_s=base_s, rewritten_MB=base_bytes / 1e6,
             bytes_ratio=f"purge writes {base_bytes / max(rewritten, 1):,.0f}x fewer bytes",
             time_ratio=f"purge {base_s / purge_s:.1f}x faster with its proof, "
                        f"{base_s / (purge_s - report['proof_s']):.1f}x without")
        if args.no_optimize:
            return
        # the same purge after `elake optimize` compacted the steps into one fragment: that
        # fragment holds the episode, so the purge rewrites the table whole
        compacted = Lake(folder / "compacted")
        compacted.optimize(prune_older_than=None)
        t = time.perf_counter()
        worst = purge.purge(compacted, [victim])
        worst_s = time.perf_counter() - t
        line("bench_purge after optimize", steps_fragments=tables.fragment_count(compacted.location, "steps"),
             purge_s=worst_s, proof_s=worst["proof_s"], rewritten_MB=worst["bytes_rewritten"] / 1e6,
             vs_full_rewrite=f"{worst['bytes_rewritten'] / base_bytes:.2f}x the bytes, "
                             f"{(worst_s - worst['proof_s']) / base_s:.1f}x the time without the proof")


if __name__ == "__main__":
    main()
