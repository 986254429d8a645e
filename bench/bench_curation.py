"""Curation writes under many curators: p50/p95 of one member write (PUT a set member, as
a curation key press does) with 20 curators writing at once, against one curator alone, on
the same server in the same run.

The server is `elake serve` in its own process over a lake of recorded episodes. Each
curator is a client thread that files its own episodes into one shared set, one write after
the other (the app waits for each answer). Concurrent writes into one table share Lance
commits (`episodelake.lake.storage.group_commit`), and what they read (the members' episodes,
the rows they replace for the audit log) is read once per commit; `rows/commit` says how
many writes each carried.
Target (issue: a team's workbench): p95 <= 150 ms per write with 20 curators.

    python bench/bench_curation.py                 # 20 curators x 15 writes, 1 x 60 alone
    python bench/bench_curation.py --curators 40 --writes 10
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from common import line, p50, percentile, workdir

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake

ELAKE = str(Path(sys.executable).with_name("elake"))


def build(path: Path, episodes: int) -> list[str]:
    from PIL import Image

    lake = Lake(path)
    ids = []
    with Recorder(lake, run_id="bench", anchor=None) as rec:
        for i in range(episodes):
            with rec.start_episode(f"task-{i % 10}", f"goal {i}") as ep:
                for _ in range(3):
                    ep.log_step(Image.new("RGB", (54, 120), (i % 255, 80, 160)),
                                '<tool_call>{"name": "mobile_use", "arguments": {"action": "wait"}}</tool_call>')
                ep.finish(success=i % 3 == 0)
            ids.append(ep.episode_id)
    return ids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(lake: Path, port: int) -> subprocess.Popen:
    server = subprocess.Popen([ELAKE, "--lake", str(lake), "serve", "--port", str(port),
                               "--background-enrich", "none"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("the server did not start")


def curate(url: str, set_id: str, episodes: list[str]) -> list[float]:
    """One curator's writes, one after the other; each write's latency in ms."""
    out = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for k, episode in enumerate(episodes):
            started = time.perf_counter()
            r = client.put(f"/api/sets/{set_id}/members/{episode}",
                           json={"failure_category": "grounding", "note": f"write {k}"})
            out.append((time.perf_counter() - started) * 1000)
            if r.status_code != 200:
                raise SystemExit(f"write refused: {r.status_code} {r.text}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--curators", type=int, default=20)
    parser.add_argument("--writes", type=int, default=15, help="writes per curator")
    parser.add_argument("--alone", type=int, default=60, help="writes of the lone curator")
    args = parser.parse_args()
    with workdir("curation") as folder:
        needed = max(args.curators * args.writes, args.alone)
        ids = build(folder / "lake", needed)
        port = free_port()
        server = serve(folder / "lake", port)
        url = f"http://127.0.0.1:{port}"
        try:
            set_id = httpx.post(f"{url}/api/sets", json={"name": "bench"}).json()["set_id"]
            curate(url, set_id, ids[:5])  # warm up
            alone = curate(url, set_id, ids[:args.alone])
            versions_before = Lake(folder / "lake").dataset("set_members").version
            chunks = [ids[c * args.writes:(c + 1) * args.writes] for c in range(args.curators)]
            started = time.perf_counter()
            with ThreadPoolExecutor(args.curators) as pool:
                together = [ms for got in pool.map(lambda chunk: curate(url, set_id, chunk), chunks) for ms in got]
            wall = time.perf_counter() - started
            commits = Lake(folder / "lake").dataset("set_members").version - versions_before
            members = httpx.get(f"{url}/api/sets/{set_id}").json()["members"]
        finally:
            server.terminate()
            server.wait(timeout=30)
    assert members == needed, f"{members} members stored, {needed} written"
    line("bench_curation one curator", writes=len(alone), p50_ms=p50(alone), p95_ms=percentile(alone, 95))
    line(f"bench_curation {args.curators} curators", writes=len(together), p50_ms=p50(together),
         p95_ms=percentile(together, 95), writes_per_s=len(together) / wall,
         rows_per_commit=len(together) / max(commits, 1),
         p95_vs_alone=percentile(together, 95) / percentile(alone, 95), target_p95_ms=150,
         met=percentile(together, 95) <= 150)
    print(f"(cpus: {os.cpu_count()}; every write stored: {members} members)")


if __name__ == "__main__":
    main()
