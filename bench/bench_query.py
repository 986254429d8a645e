"""Query: SQL over a 20,000-episode x 15-step lake vs scanning the same episodes as JSON folders.

Two questions people ask every day: "failed episodes of one task" and "success rate per
task per policy_version". The baseline answers them the only way the reference's folders
allow: open and parse episode.json files (only the task's folder for the first question).
Then random single-step image fetches by (episode_id, step), through the episode_id index.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from datetime import UTC, datetime

import pyarrow as pa
from common import latencies_ms, line, p50, percentile, workdir
from screens import phone_screen

from episodelake.lake import Lake
from episodelake.lake.storage import schema, tables

TASKS = 40
POLICIES = 10


def build(lake: Lake, folders, episodes: int, steps: int) -> None:
    rng = random.Random(7)
    images = [phone_screen(s, size=(108, 240)) for s in range(8)]
    now = datetime.now(UTC)
    chunk = 1000
    for start in range(0, episodes, chunk):
        ep_rows, step_rows = [], {c: [] for c in ("episode_id", "step", "image", "action_type", "reward")}
        for e in range(start, min(start + chunk, episodes)):
            eid = f"ep{e:06d}"
            task = f"task_{e % TASKS:02d}"
            success = rng.random() < 0.4
            ep = {"episode_id": eid, "task_name": task, "task_goal": f"goal of {task}",
                  "policy_version": f"p{e % POLICIES}", "group_id": f"g{e // 8}", "status": "finished",
                  "success": success, "eval_score": float(success), "episode_length": steps, "created_at": now}
            ep_rows.append(ep)
            for n in range(steps):
                step_rows["episode_id"].append(eid)
                step_rows["step"].append(n)
                step_rows["image"].append(images[(e + n) % len(images)])
                step_rows["action_type"].append("click")
                step_rows["reward"].append(0.0)
            folder = folders / task / eid
            folder.mkdir(parents=True)
            meta = {"task_name": task, "task_goal": ep["task_goal"], "episode_id": eid,
                    "policy_version": ep["policy_version"], "success": success, "eval_score": ep["eval_score"]}
            doc = {"meta_data": meta, "episode": [
                {"step": n, "image_path": str(folder / "images" / f"step_{n:04d}.png"),
                 "model_response": '<tool_call>{"name":"mobile_use","arguments":{"action":"click","coordinate":[1,2]}}</tool_call>',
                 "timestamp": now.isoformat()} for n in range(steps)]}
            (folder / "episode.json").write_text(json.dumps(doc))
        tables.commit(lake.path, "episodes", schema.conform("episodes", ep_rows), "append")
        n = len(step_rows["step"])
        cols = {c: step_rows.get(c, [None] * n) for c in schema.STEPS.names}
        tables.commit(lake.path, "steps", pa.table(cols, schema=schema.STEPS), "append")
    lake.optimize(prune_older_than=None)


def scan_failed(folders, task: str) -> list[str]:
    out = []
    for path in (folders / task).glob("*/episode.json"):
        meta = json.loads(path.read_text())["meta_data"]
        if meta.get("success") is False:
            out.append(meta["episode_id"])
    return out


def scan_rates(folders) -> dict:
    acc: dict[tuple, list[int]] = {}
    for path in folders.glob("*/*/episode.json"):
        meta = json.loads(path.read_text())["meta_data"]
        acc.setdefault((meta["task_name"], meta["policy_version"]), []).append(int(meta["success"]))
    return {k: sum(v) / len(v) for k, v in acc.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=20_000)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    with workdir("query") as d:
        lake = Lake(d / "lake")
        t = time.perf_counter()
        build(lake, d / "folders", args.episodes, args.steps)
        line("query build", episodes=args.episodes, steps=args.episodes * args.steps,
             seconds=time.perf_counter() - t)

        failed_sql = "select episode_id from episodes where task_name = 'task_07' and success = false"
        rates_sql = ("select task_name, policy_version, avg(success::int) rate, count(*) n "
                     "from episodes group by 1, 2")
        got = {r["episode_id"] for r in lake.sql(failed_sql).to_pylist()}
        assert got == set(scan_failed(d / "folders", "task_07")), "SQL and scan disagree"
        assert len(lake.sql(rates_sql)) == len(scan_rates(d / "folders"))

        for name, query, baseline in (
            ("failed episodes of one task", failed_sql, lambda: scan_failed(d / "folders", "task_07")),
            ("success rate per task x policy", rates_sql, lambda: scan_rates(d / "folders")),
        ):
            sql_ms = latencies_ms(lambda q=query: lake.sql(q), args.repeat)
            scan_ms = latencies_ms(baseline, max(2, args.repeat // 10), warmup=1)
            line(f"query {name}", sql_p50_ms=p50(sql_ms), sql_p99_ms=percentile(sql_ms, 99),
                 json_scan_p50_ms=p50(scan_ms), speedup=f"{p50(scan_ms) / p50(sql_ms):.0f}x")

        rng = random.Random(3)
        keys = [(f"ep{rng.randrange(args.episodes):06d}", rng.randrange(args.steps)) for _ in range(300)]
        it = iter(keys)
        fetch_ms = latencies_ms(lambda: lake.image(*next(it)), len(keys) - 5, warmup=5)
        line("query random step-image fetch", p50_ms=p50(fetch_ms), p99_ms=percentile(fetch_ms, 99))


if __name__ == "__main__":
    main()
