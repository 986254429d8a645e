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
- `log_step` latency while the store refuses every connection, and while it hangs (accepts
  and never answers), for `--outage` seconds each (a TCP proxy in front of moto, the tests'
  `TcpProxy`), against the same steps with the store up, with default writer options; a new
  episode starts every 20 steps throughout, every other one with an id the caller gives (the
  first such start during an outage waits for the store's answer, the later ones take their
  claims provisionally at once); the steps acknowledged during the outage are counted in the
  lake once it is back;
- the fleet: aggregate steps/s of 1 / 2 / 4 / 8 recorder processes at once (recorder-minted
  episode ids, default writer options, so the machine's committer appends their uploaded
  fragments), on S3 and on a local folder, with commits per 1,000 steps and the CPU use
  meanwhile (share of the machine's cores busy; CPU seconds per second of the S3 server,
  which shares the cores with the writers here; CPU milliseconds per step of the writers and
  the server together, against one writer's); the same on S3 with
  `WriterOptions(handoff=False)` (each writer commits its own batches, the path before the
  committer) as the baseline of the same run. Each row is the median of `--fleet-repeat`
  runs (3), the rows' runs interleaved.

`--quick`: 10 s outages and a shorter fleet, run once (the rows' shape, in a fraction of the time);
`--only-outage` / `--only-fleet`: those rows alone.

moto keeps objects in memory on this machine, so the S3 figures show the cost of the API
(requests, listing, conditional commits) without a network's latency; a real bucket adds
tens of milliseconds per request on top. Default run: about 4 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import random
import sys
import time
from pathlib import Path

from common import CpuUse, latencies_ms, line, p50, percentile, workdir
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
                mode: str = "refused") -> tuple[list[float], list[float], int, int]:
    """Each `log_step`'s latency over `seconds` of steps (about 20 a second, a busy collector,
    a new episode every 20 steps), with the store refused or hung throughout when `proxy` is
    given; then wait for every step to land. Every other episode has an id the caller gives
    (its claim settled once the store is back), the others ids the recorder mints. Returns
    (log_step latencies, start_episode latencies by "given"/"minted", steps acknowledged,
    steps stored exactly once)."""
    rec = Recorder(uri, image_checks="structure", anchor=None)  # default writer options
    warm = rec.start_episode("outage")
    warm.finish(success=True)
    rec.flush()
    times: list[float] = []
    starts: dict[str, list[float]] = {"given": [], "minted": []}
    episodes: list[str] = []
    outage = contextlib.nullcontext() if proxy is None else (
        proxy.blocked() if mode == "refused" else proxy.hanging())
    with outage:
        end = time.monotonic() + seconds
        ep = None
        while time.monotonic() < end:
            if ep is None or len(times) % 20 == 0:
                if ep is not None:
                    ep.finish(success=True)
                kind = "given" if len(episodes) % 2 else "minted"
                given = f"given-{len(episodes):04d}" if kind == "given" else None  # a fresh bucket each run
                started = time.perf_counter()
                ep = rec.start_episode("outage", episode_id=given)
                starts[kind].append((time.perf_counter() - started) * 1000)
                episodes.append(ep.episode_id)
            started = time.perf_counter()
            ep.log_step(screens[len(times) % len(screens)], RESPONSE)
            times.append((time.perf_counter() - started) * 1000)
            time.sleep(0.05)
        ep.finish(success=True)
    deadline = time.monotonic() + 300
    while True:
        try:
            rec.flush()
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    rec.close()
    ids = ", ".join(f"'{e}'" for e in episodes)
    stored = Lake(uri).sql(f"select count(*) n, count(distinct (episode_id, step)) d from steps "
                           f"where episode_id in ({ids})").to_pylist()[0]
    once = stored["d"] if stored["n"] == stored["d"] else -1
    return times, starts, len(times), once


def _fleet_writer(uri: str, index: int, steps: int, handoff: bool, start, out) -> None:
    """One recorder process: `steps` steps in episodes of 20, ids minted by the recorder."""
    with Recorder(uri, run_id=f"w{index}", anchor=None, image_checks="structure",
                  options=WriterOptions(handoff=handoff)) as rec:
        screens = [phone_screen(index * 10 + k, (540, 1200)) for k in range(4)]
        out.put("ready")
        start.wait()
        begun, cpu = time.perf_counter(), time.process_time()
        ep = None
        for n in range(steps):
            if n % 20 == 0:
                if ep is not None:
                    ep.finish(success=True)
                ep = rec.start_episode("fleet", "Goal")
            ep.log_step(screens[n % 4], RESPONSE)
        ep.finish(success=True)
        acknowledged = time.perf_counter()
    # closed: every step committed; the CPU seconds of all the process's threads (its uploads
    # and, where it was elected, the machine's committer) since the start
    out.put((begun, acknowledged, time.perf_counter(), time.process_time() - cpu))


def _versions(uri: str) -> dict[str, int]:
    lake = Lake(uri)
    lake.invalidate()
    return {t: lake.dataset(t).version for t in ("steps", "episodes")}


def fleet(uri: str, writers: int, steps: int, handoff: bool = True,
          store_pid: int | None = None) -> tuple[float, float, float, dict[str, float]]:
    """(aggregate steps/s, steps-table commits per 1,000 steps, all commits per 1,000 steps,
    measures of the run: CPU use while they wrote (`CpuUse`, the store's server being
    `store_pid`), `cpu_ms_per_step` (the CPU the writer processes and the store's server
    spent per step: the work the fleet costs, whatever else the machine runs) and
    `acknowledged_share`, the share of the run's time until the last step was
    acknowledged (the rest is the writers' close: committing what they hold and releasing
    their episodes' claims)) of `writers` recorder processes writing `steps` steps each at
    once."""
    Lake(uri)  # the tables exist before the writers start
    before = _versions(uri)
    context = mp.get_context("spawn")  # Lance is not fork-safe
    start, out = context.Event(), context.Queue()
    procs = [context.Process(target=_fleet_writer, args=(uri, i, steps, handoff, start, out))
             for i in range(writers)]
    for p in procs:
        p.start()
    for _ in procs:
        assert out.get(timeout=600) == "ready"
    cpu = CpuUse(store_pid)
    start.set()
    results = [out.get(timeout=1200) for _ in procs]
    used = cpu.read()
    for p in procs:
        p.join()
    wall = max(r[2] for r in results) - min(r[0] for r in results)
    used["acknowledged_share"] = (max(r[1] for r in results) - min(r[0] for r in results)) / wall
    after = _versions(uri)
    total = writers * steps
    used["cpu_ms_per_step"] = (sum(r[3] for r in results) + used.get("store_cpu_s", 0.0)) * 1000 / total
    steps_commits = after["steps"] - before["steps"]
    all_commits = sum(after[t] - before[t] for t in after)
    return total / wall, steps_commits * 1000 / total, all_commits * 1000 / total, used


def _median_run(runs: list[tuple]) -> tuple:
    """The run with the median steps/s, with its own measures (a fleet run lasts about a
    second, so one run says little on a shared machine)."""
    return sorted(runs, key=lambda r: r[0])[len(runs) // 2]


def measure_fleet(args, tmp: Path, bucket, store_pid: int) -> None:
    """The fleet rows (module docstring). Each S3 row says how busy the machine's cores were
    and how much CPU the S3 server took meanwhile: on a machine whose cores are all busy,
    more writers cannot add throughput, whatever the product does. `s3_cpu_ms_per_step`
    against one writer's says what the fleet's coordination costs: near 1x, each step costs
    the same work however many writers share the lake, and throughput is bounded by the
    cores, not by the writers' contention."""
    counts = (1, 2, 4, 8)
    runs = {w: [] for w in counts}, {w: [] for w in counts}, {w: [] for w in (1, 8)}
    for r in range(args.fleet_repeat):  # interleaved, so a slow spell of the machine hits every row
        for w in counts:
            runs[0][w].append(fleet(bucket(), w, args.fleet_steps, store_pid=store_pid))
            runs[1][w].append(fleet(str(tmp / f"fleet-{w}-{r}"), w, args.fleet_steps))
        for w in runs[2]:
            runs[2][w].append(fleet(bucket(), w, args.fleet_steps, handoff=False))
    s3, local, direct = ({w: _median_run(rs) for w, rs in kind.items()} for kind in runs)
    for w in counts:
        line(f"fleet, {w} writer process(es), {args.fleet_steps} steps each (540x1200 PNG)",
             s3_steps_s=s3[w][0], local_steps_s=local[w][0], s3_vs_local=s3[w][0] / local[w][0],
             s3_vs_1_writer=s3[w][0] / s3[1][0], s3_steps_commits_per_1000=s3[w][1],
             s3_all_commits_per_1000=s3[w][2], local_steps_commits_per_1000=local[w][1],
             s3_machine_busy=s3[w][3]["machine_busy"], s3_store_cpu_s_per_s=s3[w][3]["store_cpu_s_per_s"],
             s3_acknowledged_share=s3[w][3]["acknowledged_share"], local_machine_busy=local[w][3]["machine_busy"],
             s3_cpu_ms_per_step=s3[w][3]["cpu_ms_per_step"],
             s3_cpu_per_step_vs_1_writer=s3[w][3]["cpu_ms_per_step"] / s3[1][3]["cpu_ms_per_step"],
             local_cpu_ms_per_step=local[w][3]["cpu_ms_per_step"])
    for w in (1, 8):
        line(f"fleet baseline, {w} writer(s) committing their own batches (handoff=False), S3",
             steps_s=direct[w][0], steps_commits_per_1000=direct[w][1], all_commits_per_1000=direct[w][2],
             committer_vs_baseline=s3[w][0] / direct[w][0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--fetches", type=int, default=100)
    ap.add_argument("--commits", type=int, default=6, help="commits per writer process")
    ap.add_argument("--rounds", default="10,30,60", help="commit counts to measure growth at")
    ap.add_argument("--outage", type=float, default=30.0, help="seconds the store refuses (then hangs)")
    ap.add_argument("--fleet-steps", type=int, default=400, help="steps per writer process in the fleet rows")
    ap.add_argument("--fleet-repeat", type=int, default=3,
                    help="runs of each fleet row; the row prints the median run")
    ap.add_argument("--only-outage", action="store_true", help="measure the log_step rows only")
    ap.add_argument("--only-fleet", action="store_true", help="measure the fleet rows only")
    ap.add_argument("--quick", action="store_true", help="10 s outages, 150 steps per fleet writer")
    args = ap.parse_args()
    if args.quick:
        args.outage, args.fleet_steps = min(args.outage, 10.0), min(args.fleet_steps, 150)
        args.fleet_repeat = 1
    rounds = [int(r) for r in args.rounds.split(",")]
    screens = [phone_screen(seed) for seed in range(8)]

    with workdir("remote") as tmp:
        server = S3Server(tmp / "moto.log")
        try:
            os.environ.update(server.env())
            def bucket() -> str:
                return f"s3://{server.new_bucket()}/lake"

            if not (args.only_outage or args.only_fleet):
                measure_store(args, tmp, bucket, screens, rounds)
            if not args.only_outage:
                measure_fleet(args, tmp, bucket, server.proc.pid)
            if not args.only_fleet:
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
    """The log_step rows: the same steps with the store up, refused and hung (module docstring)."""
    up, up_starts, up_steps, up_stored = log_step_ms(bucket(), screens, args.outage, None)
    proxy = TcpProxy(int(server.endpoint.rsplit(":", 1)[1]))
    os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
    try:
        down = {mode: log_step_ms(bucket(), screens, args.outage, proxy, mode) for mode in ("refused", "hung")}
    finally:
        os.environ["AWS_ENDPOINT_URL"] = server.endpoint
        proxy.close()
    for mode, (times, starts, steps, stored) in down.items():
        line(f"log_step, store {mode} {args.outage:.0f} s (default options)", p50_ms=p50(times),
             p99_ms=percentile(times, 99), max_ms=max(times), max_vs_store_up=max(times) / max(up),
             episodes_started=len(starts["given"]) + len(starts["minted"]),
             start_minted_max_ms=max(starts["minted"]), start_given_first_ms=starts["given"][0],
             start_given_rest_max_ms=max(starts["given"][1:], default=0.0),
             steps=steps, stored_once=stored, lost_or_doubled=steps - stored)
    line("log_step, store up (same run)", p50_ms=p50(up), p99_ms=percentile(up, 99), max_ms=max(up),
         start_minted_max_ms=max(up_starts["minted"]), start_given_max_ms=max(up_starts["given"], default=0.0),
         steps=up_steps, stored_once=up_stored)


if __name__ == "__main__":
    main()
