"""Collection over HTTP: steps/s from simulated phones behind the environment server, with 1,
4 and 8 parallel collectors writing into one lake; the lake's commit rate, and its fragment
count before and after maintenance (`Lake.optimize`).

The servers run as separate processes (`collectors.envs.server.serve`), one per CPU at most, each serving
its share of the phones; collectors are threads (or Ray actors with --ray) driving a random
policy, so the numbers measure the environment, the HTTP client and the lake, not a model.
The baseline is the same phones driven in-process by one collector (no HTTP).

`steps_s` divides by the whole wall time (worker start-up included: Ray actors take seconds
to start); `steady_steps_s` by the time between the first and the last stored step, and the
ratio against the baseline uses that.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import subprocess
import sys
import time
import urllib.request

from common import line, workdir

from episodelake.collectors.envs.base import Task
from episodelake.collectors.envs.remote import RemoteOptions
from episodelake.collectors.jobs.batch import (
    RandomSpec,
    RemoteSpec,
    RunSettings,
    SimSpec,
    run_batch,
)
from episodelake.lake import Lake

SERVER = ("from episodelake.collectors.envs.server import serve;"
          "from episodelake.collectors.envs.sim.device import SimDevice, task_infos;"
          "serve({{f'sim-{{i}}': SimDevice(0, name=f'sim-{{i}}') for i in range({n})}},"
          " task_infos(), port={port})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_servers(phones: int) -> tuple[list[subprocess.Popen], list[str]]:
    """Server processes (one per CPU at most) and one URL#DEVICE entry per phone."""
    count = min(phones, os.cpu_count() or 1)
    per = math.ceil(phones / count)
    procs, entries = [], []
    for _ in range(count):
        port = free_port()
        procs.append(subprocess.Popen([sys.executable, "-c", SERVER.format(n=per, port=port)]))
        url = f"http://127.0.0.1:{port}"
        entries += [f"{url}#sim-{i}" for i in range(per)]
        wait_healthy(url)
    return procs, entries[:phones]


def wait_healthy(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def tasks(n: int) -> list[Task]:
    names = ["wifi_on", "bluetooth_on", "wifi_off", "bluetooth_off"]
    return [Task(names[i % len(names)]) for i in range(n)]


def run(lake_dir, workers, n_episodes: int, max_steps: int, backend: str) -> dict:
    lake = Lake(lake_dir)
    t = time.perf_counter()
    report = run_batch(lake_dir, workers, tasks(n_episodes),
                       RunSettings("bench", max_steps=max_steps), backend=backend)
    elapsed = time.perf_counter() - t
    lake.invalidate()
    steps = lake.dataset("steps").count_rows()
    # steady rate from the steps' own timestamps: leaves out worker start-up (Ray actors)
    span = lake.sql("SELECT epoch(max(timestamp)) - epoch(min(timestamp)) AS s FROM steps")["s"][0]
    before = {t: len(lake.dataset(t).get_fragments()) for t in ("steps", "episodes")}
    lake.optimize(prune_older_than=None)
    after = {t: len(lake.dataset(t).get_fragments()) for t in ("steps", "episodes")}
    return {"steps": steps, "seconds": elapsed, "steps_s": steps / elapsed,
            "steady_steps_s": (steps - 1) / span.as_py(),
            "commits": report.commits, "commits_s": report.commits / elapsed,
            "frag_before": before, "frag_after": after}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--episodes-per-worker", type=int, default=3)
    ap.add_argument("--max-steps", type=int, default=10)
    ap.add_argument("--ray", action="store_true", help="collectors as Ray actors")
    args = ap.parse_args()
    backend = "ray" if args.ray else "thread"

    with workdir("collect") as d:
        base = run(d / "base", [(SimSpec(0), RandomSpec(1, 0.1))], args.episodes_per_worker * 2,
                   args.max_steps, "thread")
        line("collect in-process (baseline)", workers=1, steps=base["steps"],
             steps_s=base["steps_s"], steady_steps_s=base["steady_steps_s"])
        for n in args.workers:
            procs, entries = start_servers(n)
            try:
                options = RemoteOptions(retry_wait_s=0.5)
                workers = [(RemoteSpec((entry,), options), RandomSpec(i, 0.1))
                           for i, entry in enumerate(entries)]
                r = run(d / f"lake-{n}", workers, args.episodes_per_worker * n, args.max_steps,
                        backend)
            finally:
                for p in procs:
                    p.terminate()
                    p.wait()
            line(f"collect http {backend}", workers=n, servers=len(procs), steps=r["steps"],
                 steps_s=r["steps_s"], steady_steps_s=r["steady_steps_s"],
                 vs_in_process=r["steady_steps_s"] / base["steady_steps_s"],
                 commits_s=r["commits_s"],
                 fragments=f"{r['frag_before']['steps']}->{r['frag_after']['steps']} steps, "
                           f"{r['frag_before']['episodes']}->{r['frag_after']['episodes']} episodes")


if __name__ == "__main__":
    main()
