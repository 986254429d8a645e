"""Episode upserts on a grown lake: with the key index kept fresh (the default) against the
same upserts with the upkeep off, in the same run.

Every recorder upserts an episode's row when it starts and when it finishes (and a caller's
own episode id is looked up first). An upsert finds its key among the stored rows: rows the
key index covers are found through it, the others by reading their key column. A lake that
grew by one small commit per episode, with the index never folded, reads more with every
episode. The lake here: `--episodes` rows committed `--per-commit` at a time, as recorders do.

    python bench/bench_upsert.py                  # 5,000 episodes in 500 commits
    python bench/bench_upsert.py --episodes 20000 --per-commit 10
"""

from __future__ import annotations

import argparse
import shutil
from datetime import UTC, datetime

from common import latencies_ms, line, p50, percentile, workdir

from episodelake.lake import Lake
from episodelake.lake.storage import tables


def episode(i: int, status: str) -> dict:
    return {"episode_id": f"ep-{i:07d}", "run_id": "bench", "task_name": f"task-{i % 40}",
            "task_goal": "Turn on Wi-Fi.", "status": status, "created_at": datetime(2026, 1, 1, tzinfo=UTC)}


def grown(lake: Lake, episodes: int, per_commit: int) -> None:
    for start in range(0, episodes, per_commit):
        lake.upsert("episodes", [episode(i, "running") for i in range(start, min(episodes, start + per_commit))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5000)
    parser.add_argument("--per-commit", type=int, default=10)
    parser.add_argument("--samples", type=int, default=40)
    args = parser.parse_args()
    with workdir("upsert") as folder:
        every = tables.INDEX_CHECK_EVERY
        tables.INDEX_CHECK_EVERY = 10**9  # grow both lakes alike, without upkeep
        grown(Lake(folder / "stale"), args.episodes, args.per_commit)
        shutil.copytree(folder / "stale", folder / "fresh")
        fresh = Lake(folder / "fresh")
        tables.keep_key_index(fresh.location, "episodes", max_unindexed=0)
        fragments = tables.fragment_count(fresh.location, "episodes")
        print(f"lake: {args.episodes} episodes in {fragments} fragments ({args.per_commit} per commit)")
        results = {}
        for name, upkeep in (("stale", 10**9), ("fresh", every)):
            tables.INDEX_CHECK_EVERY = upkeep
            lake = Lake(folder / name)
            counter = iter(range(10**9))

            def finish_one(lake: Lake = lake, counter=counter) -> None:
                i = next(counter) * 97 % args.episodes
                lake.upsert("episodes", [episode(i, "finished")])
                lake.episode(f"ep-{(i * 31) % args.episodes:07d}")  # a caller-given id looked up

            results[name] = latencies_ms(finish_one, args.samples)
        tables.INDEX_CHECK_EVERY = every
        stale, fresh_ms = results["stale"], results["fresh"]
        line("upsert baseline, index never folded", p50_ms=p50(stale), p95_ms=percentile(stale, 95))
        line("upsert, key index kept fresh", p50_ms=p50(fresh_ms), p95_ms=percentile(fresh_ms, 95),
             vs_baseline=f"{p50(stale) / p50(fresh_ms):.1f}x")


if __name__ == "__main__":
    main()
