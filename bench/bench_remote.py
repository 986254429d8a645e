"""A lake on object storage: the S3 API (moto's standalone server on loopback, the same
launcher as the tests) against a local folder, measured in the same run.

- ingest: steps/s through the Recorder (structure checks, so the PNG decode does not hide
  the storage), one writer, the same steps into each lake;
- image fetch: p50 / p99 of a random step's screenshot (`Lake.image`); and the API's image
  path (`api.images_cache.stored_image`, on a lake opened as `elake serve` opens it): cold
  (each step's first fetch) against warm (the same steps again, from the in-memory cache);
- commits/s with 1, 4 and 8 writer processes committing small batches into one S3 lake at
  once (each commit retried on conflicts like every writer's);
- fragments and read latency as commits pile up (a query over `steps` and one episode's
  steps), then after `Lake.optimize`;
- `log_step` latency while the store refuses every connection for `--outage` seconds (a TCP
  proxy in front of moto, the tests' `TcpProxy`), against the same steps with the store up,
  and the steps acknowledged during the outage counted in the lake once it is back.

moto keeps objects in memory on this machine, so the S3 figures show the cost of the API
(requests, listing, conditional commits) without a network's latency; a real bucket adds
tens of milliseconds per request on top. Default run: about 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import sys
import time
from pathlib import Path

from common import latencies_ms, line, p50, percentile, workdir
from screens import phone_screen

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from episodelake.collectors.record.recorder import Recorder  # noqa: E402
from episodelake.lake import Lake  # noqa: E402
from episodelake.lake.core.writer import WriterOptions  # noqa: E402
from tests.factories import response  # noqa: E402
from tests.remote.proxy import TcpProxy  # noqa: E402  (the tests' proxy)
from tests.remote.s3_server import S3Server  # noqa: E402  (the tests' launcher)

RESPONSE = response()


def ingest(uri: str, screens: list[bytes], episodes: int, steps: int) -> float:
    """Steps/s of one recorder writing `episodes` x `steps` (flushed at the end)."""
    started = time.perf_counter()
    with Recorder(uri, run_id="bench", anchor=None, image_checks="structure") as rec:
        for e in range(episodes):
            with rec.start_episode(f"task-{e % 8}", "Goal", episode_id=f"ep-{e:04d}") as ep:
                for n in range(steps):
                    ep.log_step(screens[(e + n) % len(screens)], f"step {n}")
                ep.finish(success=e % 2 == 0)
    return episodes * steps / (time.perf_counter() - started)


def fetch_ms(uri: str, episodes: int, steps: int, n: int) -> list[float]:
    lake = Lake(uri, create=False, refresh_s=60.0)
    rng = random.Random(0)
    return latencies_ms(lambda: lake.image(f"ep-{rng.randrange(episodes):04d}", rng.randrange(steps)), n)


def cached_fetch_ms(uri: str, episodes: int, steps: int, n: int) -> tuple[list[float], list[float]]:
    """(cold, warm) latencies of the API's image path over `n` distinct steps."""
    from episodelake.api.images_cache import stored_image

    lake = Lake(uri, create=False)
    picks = random.Random(1).sample([(f"ep-{e:04d}", s) for e in range(episodes) for s in range(steps)],
                                    min(n, episodes * steps))
    cold, warm = [], []
    for times in (cold, warm):
        for episode_id, step in picks:
            started = time.perf_counter()
            stored_image(lake, episode_id, step)
            times.append((time.perf_counter() - started) * 1000)
    return cold, warm


def _writer(uri: str, index: int, commits: int, start, out) -> None:
    """One writer process: `commits` commits of one small episode each."""
    options = WriterOptions(batch_rows=10_000, max_age_s=3600)
    with Recorder(uri, run_id=f"w{index}", anchor=None, image_checks="structure",
                  options=options) as rec:
        screen = phone_screen(index, (108, 240))
        out.put("ready")
        start.wait()
        begun = time.perf_counter()
        for c in range(commits):
            with rec.start_episode("t", "Goal", episode_id=f"w{index}-{c:04d}") as ep:
                ep.log_step(screen, "x")
                ep.finish(success=True)
            rec.flush()
        out.put((begun, time.perf_counter(), rec.writer.commits))


def commits_per_s(uri: str, writers: int, commits: int) -> float:
    context = mp.get_context("spawn")  # Lance is not fork-safe
    start, out = context.Event(), context.Queue()
    procs = [context.Process(target=_writer, args=(uri, i, commits, start, out))
             for i in range(writers)]
    for p in procs:
        p.start()
    for _ in procs:  # every writer has opened the lake: start them together
        assert out.get(timeout=600) == "ready"
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    wall = max(r[1] for r in results) - min(r[0] for r in results)
    return sum(r[2] for r in results) / wall


def read_ms(lake: Lake, n: int) -> tuple[float, float]:
    lake.invalidate()
    query = lambda: lake.sql("SELECT task_name, count(*) FROM steps JOIN episodes USING (episode_id) GROUP BY 1")  # noqa: E731
    one = lambda: lake.steps("ep-0001")  # noqa: E731
    return p50(latencies_ms(query, n, warmup=1)), p50(latencies_ms(one, n, warmup=1))


def fragments(lake: Lake) -> int:
    lake.invalidate()
    return len(lake.dataset("steps").get_fragments())


def growth(name: str, uri: str, rounds: list[int], n: int) -> None:
    """Commits of one small episode each, measuring after each round, then optimize."""
    lake = Lake(uri)
    options = WriterOptions(batch_rows=10_000, max_age_s=3600)
    screen = phone_screen(1, (108, 240))
    done = 0
    with Recorder(uri, run_id="growth", anchor=None, image_checks="structure",
                  options=options) as rec:
        for target in rounds:
            while done < target:
                with rec.start_episode("t", "Goal", episode_id=f"g-{done:05d}") as ep:
                    ep.log_step(screen, "x")
                    ep.finish(success=True)
                rec.flush()
                done += 1
            query, one = read_ms(lake, n)
            line(f"remote {name} after commits", commits=done, fragments=fragments(lake),
                 query_p50_ms=query, episode_steps_p50_ms=one)
    started = time.perf_counter()
    lake.optimize(prune_older_than=None)
    took = time.perf_counter() - started
    query, one = read_ms(lake, n)
    line(f"remote {name} after optimize", commits=done, fragments=fragments(lake),
         query_p50_ms=query, episode_steps_p50_ms=one, optimize_s=took)


def log_step_ms(uri: str, screens: list[bytes], seconds: float, proxy: TcpProxy | None,
                episode_id: str) -> tuple[list[float], int]:
    """Each `log_step`'s latency over `seconds` of steps (about 20 a second, a busy collector),
    with the store refused throughout when `proxy` is given; then wait for every step to land
    and return (latencies, steps stored)."""
    rec = Recorder(uri, image_checks="structure", options=WriterOptions(batch_rows=8, max_age_s=1.0))
    ep = rec.start_episode("outage", episode_id=episode_id)
    rec.flush()
    times: list[float] = []
    if proxy is not None:
        proxy.block()
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.perf_counter()
            ep.log_step(screens[len(times) % len(screens)], RESPONSE)
            times.append((time.perf_counter() - started) * 1000)
            time.sleep(0.05)
    finally:
        if proxy is not None:
            proxy.unblock()
    deadline = time.monotonic() + 180
    while True:
        try:
            rec.flush()
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    ep.finish(success=True)
    rec.close()
    stored = Lake(uri).sql(f"select count(distinct step) n from steps where episode_id = '{episode_id}'")
    return times, stored.to_pylist()[0]["n"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--fetches", type=int, default=100)
    ap.add_argument("--commits", type=int, default=6, help="commits per writer process")
    ap.add_argument("--rounds", default="10,30,60", help="commit counts to measure growth at")
    ap.add_argument("--outage", type=float, default=30.0, help="seconds the store refuses connections")
    ap.add_argument("--only-outage", action="store_true", help="measure the log_step rows only")
    args = ap.parse_args()
    rounds = [int(r) for r in args.rounds.split(",")]
    screens = [phone_screen(seed) for seed in range(8)]

    with workdir("remote") as tmp:
        server = S3Server(tmp / "moto.log")
        try:
            os.environ.update(server.env())
            def bucket() -> str:
                return f"s3://{server.new_bucket()}/lake"

            if not args.only_outage:
                measure_store(args, tmp, bucket, screens, rounds)
            outage(args, bucket, screens, server)
        finally:
            server.stop()


def measure_store(args, tmp: Path, bucket, screens: list[bytes], rounds: list[int]) -> None:
    """The ingest, fetch, commit and growth rows (module docstring)."""
    local, s3 = str(tmp / "local"), bucket()
    local_rate = ingest(local, screens, args.episodes, args.steps)
    s3_rate = ingest(s3, screens, args.episodes, args.steps)
    line("remote ingest (1080x2400 PNG)", s3_steps_s=s3_rate, local_steps_s=local_rate,
         ratio=s3_rate / local_rate)

    local_ms = fetch_ms(local, args.episodes, args.steps, args.fetches)
    s3_ms = fetch_ms(s3, args.episodes, args.steps, args.fetches)
    line("remote image fetch", s3_p50_ms=p50(s3_ms), s3_p99_ms=percentile(s3_ms, 99),
         local_p50_ms=p50(local_ms), ratio=p50(s3_ms) / p50(local_ms))

    s3_cold, s3_warm = cached_fetch_ms(s3, args.episodes, args.steps, args.fetches)
    local_cold, local_warm = cached_fetch_ms(local, args.episodes, args.steps, args.fetches)
    line("remote API image fetch, cold vs warm", s3_cold_p50_ms=p50(s3_cold),
         s3_warm_p50_ms=p50(s3_warm), local_cold_p50_ms=p50(local_cold),
         local_warm_p50_ms=p50(local_warm))

    rates = {w: commits_per_s(bucket(), w, args.commits) for w in (1, 4, 8)}
    line("remote commits/s, 1/4/8 writers", **{f"w{w}": r for w, r in rates.items()},
         local_w1=commits_per_s(str(tmp / "commits"), 1, args.commits))

    growth("s3", bucket(), rounds, 20)
    growth("local", str(tmp / "growth"), rounds, 20)


def outage(args, bucket, screens: list[bytes], server: S3Server) -> None:
    """The log_step rows: the same steps with the store up and refused (module docstring)."""
    up, up_stored = log_step_ms(bucket(), screens, args.outage, None, "store-up")
    proxy = TcpProxy(int(server.endpoint.rsplit(":", 1)[1]))
    os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
    try:
        down, down_stored = log_step_ms(bucket(), screens, args.outage, proxy, "store-refused")
    finally:
        os.environ["AWS_ENDPOINT_URL"] = server.endpoint
        proxy.close()
    line(f"log_step, store refused {args.outage:.0f} s", p50_ms=p50(down), p99_ms=percentile(down, 99),
         max_ms=max(down), steps=len(down), stored=down_stored, lost_or_doubled=len(down) - down_stored)
    line("log_step, store up (same run)", p50_ms=p50(up), p99_ms=percentile(up, 99), max_ms=max(up),
         steps=len(up), stored=up_stored, max_ratio=max(down) / max(up))


if __name__ == "__main__":
    main()
