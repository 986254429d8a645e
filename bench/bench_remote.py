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
- each recorder call's latency (`Recorder()`, `start_episode` with ids minted and given,
  `log_step`, `finish`) while the store refuses every connection, and while it hangs
  (accepts and never answers), for `--outage` seconds each (a TCP proxy in front of moto, the
  tests' `TcpProxy`), against the same steps with the store up, with default writer options:
  the recorder is opened during the outage, a new episode starts every 20 steps, every other
  one with an id the caller gives; the steps acknowledged during the outage are counted in
  the lake once it is back;
- the fleet (`measure_fleet`): 1 and 8 recorder processes (`--fleet-writers`) at full speed,
  `--machines` machines of 2 writers, the baseline of writers committing their own batches
  (`WriterOptions(handoff=False)`), and 1 and 8 writers at a collector's pace
  (`--fleet-rate` steps/s each): committed steps/s (a reader polling the latest `steps` version's row count) beside
  acknowledged, commits per 1,000 steps, CPU per step, freshness (p50/p99 from `log_step`
  returning to the `steps` version that holds the row being committed, from the versions'
  timestamps: what any `Lake.sql` from then on sees; `seen_p99_ms`: to the polling reader
  seeing it, its poll interval included), conflict retries per 1,000
  commits and each call's max, with moto answering at once and, with `--store-latency-ms
  25`, through a proxy that delays every request (a bucket 25 ms away). Each row is the median of `--fleet-repeat` runs, interleaved.

`--stages`: each fleet row also prints, per 1,000 steps, the wall ms, CPU ms (the calling
thread's) and calls of each stage of the commit path in every writer process (uploads,
offers, the committer's rounds and appends, shared commits by table and kind, claim appends
and deletes, episode upserts): which stage grows with writers.

`--quick`: 10 s outages and a shorter fleet, run once (the rows' shape, in a fraction of the time);
`--only-outage` / `--only-fleet`: those rows alone.

moto keeps objects in memory on this machine, so the S3 figures without
`--store-latency-ms` show the cost of the API (requests, listing, conditional commits)
without a network's latency; a real bucket adds tens of milliseconds per request on top,
which `--store-latency-ms 25` models. On a 2-core machine the writers, moto and the proxy
share the cores: a row whose `machine_busy` is near 1 is bounded by them, and its CPU per
step (against one writer's) says what the fleet costs. Default run: about 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import queue
import random
import subprocess
import sys
import threading
import time
from datetime import UTC
from pathlib import Path

from common import CpuUse, latencies_ms, line, p50, percentile, workdir
from screens import phone_screen

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests.remote (the proxy, the S3 server)
from episodelake.collectors.record.recorder import Recorder  # noqa: E402
from episodelake.lake import Lake  # noqa: E402
from episodelake.lake.storage.writer import WriterOptions  # noqa: E402
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
                mode: str = "refused") -> dict:
    """Each recorder call's latency over `seconds` of steps (about 20 a second, a busy
    collector, a new episode every 20 steps), with the store refused or hung throughout when
    `proxy` is given: the recorder is opened during the outage (this machine opened the lake
    before), and every other episode has an id the caller gives (its claim settled once the
    store is back), the others ids the recorder mints; then wait for every step to land.
    Returns the latencies (ms) by call, the steps acknowledged and those stored exactly once."""
    with Recorder(uri, image_checks="structure", anchor=None) as warm:  # this machine knows the lake
        warm.start_episode("outage").finish(success=True)
    times: dict[str, list[float]] = {"open": [], "log_step": [], "given": [], "minted": [], "finish": []}

    def timed(kind: str, fn, *args, **kwargs):
        started = time.perf_counter()
        value = fn(*args, **kwargs)
        times[kind].append((time.perf_counter() - started) * 1000)
        return value

    episodes: list[str] = []
    outage = contextlib.nullcontext() if proxy is None else (
        proxy.blocked() if mode == "refused" else proxy.hanging())
    with outage:
        rec = timed("open", Recorder, uri, image_checks="structure", anchor=None)  # default writer options
        end = time.monotonic() + seconds
        ep = None
        while time.monotonic() < end:
            if ep is None or len(times["log_step"]) % 20 == 0:
                if ep is not None:
                    timed("finish", ep.finish, success=True)
                kind = "given" if len(episodes) % 2 else "minted"
                given = f"given-{len(episodes):04d}" if kind == "given" else None  # a fresh bucket each run
                ep = timed(kind, rec.start_episode, "outage", episode_id=given)
                episodes.append(ep.episode_id)
            timed("log_step", ep.log_step, screens[len(times["log_step"]) % len(screens)], RESPONSE)
            time.sleep(0.05)
        timed("finish", ep.finish, success=True)
    rec.close(timeout=300)  # the one wait: until the store has taken everything
    ids = ", ".join(f"'{e}'" for e in episodes)
    stored = Lake(uri).sql(f"select count(*) n, count(distinct (episode_id, step)) d from steps "
                           f"where episode_id in ({ids})").to_pylist()[0]
    steps = len(times["log_step"])
    return {"times": times, "steps": steps, "once": stored["d"] if stored["n"] == stored["d"] else -1,
            "episodes": len(episodes)}


#: With `--stages`: each writer process times these engine calls (wall and thread CPU seconds,
#: calls), so a fleet row says which stage of the commit path grows with writers.
STAGES = [("tables", "commit"), ("committer", "write"), ("committer", "offer"), ("committer", "offered"),
          ("committer", "append_fragments"), ("group_commit", "together"), ("claims", "_append_locked"),
          ("claims", "_delete_locked"), ("claims", "settle"), ("committer.NodeCommitter", "round"),
          ("committer.UpdateLane", "_merge"),
          ("writer.LakeWriter", "_commit"), ("writer.LakeWriter", "_settle_flights")]


def _time_stages() -> dict[str, list[float]]:
    """Wrap the `STAGES` calls of this process; returns their totals [wall s, cpu s, calls]."""
    import functools  # noqa: PLC0415
    import importlib  # noqa: PLC0415

    totals: dict[str, list[float]] = {}
    for where, name in STAGES:
        module, _, cls = where.partition(".")
        owner = importlib.import_module(f"episodelake.lake.storage.{module}")
        if cls:
            owner = getattr(owner, cls)
        fn = getattr(owner, name)
        key = f"{where.split('.')[-1]}.{name}"
        totals[key] = [0.0, 0.0, 0]

        def timed(*args, __fn=fn, __key=key, **kwargs):
            t, c = time.perf_counter(), time.thread_time()
            try:
                return __fn(*args, **kwargs)
            finally:
                if __key == "group_commit.together":  # by table and kind of write
                    __key = f"together.{args[2]}.{args[3]}"
                entry = totals.setdefault(__key, [0.0, 0.0, 0])
                entry[0] += time.perf_counter() - t
                entry[1] += time.thread_time() - c
                entry[2] += 1

        setattr(owner, name, functools.wraps(fn)(timed))
    return totals


def _log_uploads() -> list[tuple[float, float, list]]:
    """Wrap `committer.write` of this process to log each upload of steps: (wall start, wall
    end, its rows' (episode_id, step)), so a step's freshness splits into its wait before the
    upload, the upload, and the commit after it (`freshness_parts`)."""
    from episodelake.lake.storage import committer  # noqa: PLC0415

    uploads: list[tuple[float, float, list]] = []
    write = committer.write

    def logged(lake, table, rows, max_rows_per_file):
        started = time.time()
        fragments = write(lake, table, rows, max_rows_per_file)
        if table == "steps":
            keys = list(zip(rows.column("episode_id").to_pylist(), rows.column("step").to_pylist(), strict=True))
            uploads.append((started, time.time(), keys))
        return fragments

    committer.write = logged
    return uploads


def freshness_parts(results: list[dict], acks: dict[tuple[str, int], float],
                    delay: dict[tuple[str, int], float]) -> dict[str, str]:
    """Each step's `delay` (from `log_step` returning, `acks`, to its version's commit) split
    into: to its upload starting (the batch's age, an offer ahead of it held back), the upload,
    and from the upload to the commit (the committer's round, and the round before it); p50 of
    each over all steps, and their means over the slowest 1% of steps, with the steps of the
    episode those were."""
    parts = []
    for r in results:
        for started, ended, keys in r.get("uploads", []):
            for key in keys:
                if key in delay:
                    total, at = delay[key], acks[key]
                    parts.append((total, started - at, ended - started, at + total - ended, key[1]))
    if not parts:
        return {}
    parts.sort()
    slowest = parts[int(len(parts) * 0.99):] or parts[-1:]
    names = ("before_upload", "upload", "to_commit")
    out = {f"{n}_p50_s": f"{p50([p[i + 1] for p in parts]):.2f}" for i, n in enumerate(names)}
    out |= {f"{n}_slowest1pct_s": f"{sum(p[i + 1] for p in slowest) / len(slowest):.2f}" for i, n in enumerate(names)}
    out["slowest1pct_steps_of_episode"] = ",".join(str(s) for s in sorted({p[4] for p in slowest}))
    return out


def _fleet_writer(uri: str, index: int, steps: int, handoff: bool, env: dict[str, str], start, out) -> None:
    """One recorder process: `steps` steps in episodes of 20, ids minted by the recorder
    (every other episode's id given by the caller with `--fleet-given-ids`). `env`: the
    machine it plays (its spool root and machine id) and the store's endpoint."""
    os.environ.update(env)
    from episodelake.lake.storage import tables  # noqa: PLC0415  (after the environment is set)

    given = env.get("BENCH_GIVEN_IDS") == "1"
    stages = _time_stages() if env.get("BENCH_STAGES") == "1" else {}
    uploads = _log_uploads() if env.get("BENCH_STAGES") == "1" else []
    rate = float(env.get("BENCH_RATE") or 0)  # steps/s of this writer (0: as fast as it can)
    slowest = {"open": 0.0, "start": 0.0, "log_step": 0.0, "finish": 0.0}

    def timed(kind: str, fn, *args, **kwargs):
        t = time.perf_counter()
        value = fn(*args, **kwargs)
        slowest[kind] = max(slowest[kind], (time.perf_counter() - t) * 1000)
        return value

    screens = [phone_screen(index * 10 + k, (540, 1200)) for k in range(4)]
    out.put("ready")
    start.wait()
    begun, cpu = time.perf_counter(), time.process_time()
    acks: list[tuple[str, int, float]] = []
    rec = timed("open", Recorder, uri, run_id=f"w{index}", anchor=None, image_checks="structure",
                options=WriterOptions(handoff=handoff))
    ep = None
    for n in range(steps):
        if rate:
            time.sleep(max(0.0, begun + n / rate - time.perf_counter()))
        if n % 20 == 0:
            if ep is not None:
                timed("finish", ep.finish, success=True)
            episode_id = f"w{index}-{n // 20:04d}" if given and (n // 20) % 2 else None
            ep = timed("start", rec.start_episode, "fleet", "Goal", episode_id=episode_id)
        timed("log_step", ep.log_step, screens[n % 4], RESPONSE)
        acks.append((ep.episode_id, n % 20, time.time()))
    timed("finish", ep.finish, success=True)
    acknowledged = time.perf_counter()
    rec.close()
    # closed: every step committed; the CPU seconds of all the process's threads (its uploads
    # and, where it was elected, the machine's committer) since the start
    out.put({"begun": begun, "acknowledged": acknowledged, "closed": time.perf_counter(),
             "cpu_s": time.process_time() - cpu, "slowest_ms": slowest, "acks": acks,
             "commits": tables.commit_counts["commits"], "conflict_retries": tables.commit_counts["conflict_retries"],
             "stages": stages, "uploads": uploads})


def _versions(uri: str) -> dict[str, int]:
    lake = Lake(uri)
    lake.invalidate()
    found = {t: lake.dataset(t).version for t in ("steps", "episodes")}
    from episodelake.lake.storage import layout, tables

    claims_table = layout.table_path(lake.location, layout.CLAIMS_TABLE)
    try:
        found["_claims"] = tables.dataset(claims_table).version
    except tables.DatasetMissing:
        found["_claims"] = 0
    return found


def committed_at(uri: str, after_version: int) -> dict[tuple[str, int], tuple[float, int]]:
    """When each step of the run became visible to `Lake.sql` (which checks out the latest
    version at every query), and in which version: the wall time of the first `steps`
    version holding it, read from the versions' own timestamps after the run (a version's
    new fragments are its new rows), so a reader's polling and query time do not count."""
    from episodelake.lake.storage import layout, tables  # noqa: PLC0415

    ds = tables.dataset(layout.table_path(Lake(uri).location, "steps"))
    found: dict[tuple[str, int], tuple[float, int]] = {}
    known = {f.fragment_id for f in ds.checkout_version(after_version).get_fragments()}
    for v in ds.versions():
        if v["version"] <= after_version:
            continue
        at = ds.checkout_version(v["version"])
        new = [f for f in at.get_fragments() if f.fragment_id not in known]
        known |= {f.fragment_id for f in new}
        if not new:
            continue
        when = v["timestamp"].replace(tzinfo=UTC).timestamp()  # naive UTC
        for r in at.scanner(fragments=new, columns=["episode_id", "step"]).to_table().to_pylist():
            found.setdefault((r["episode_id"], r["step"]), (when, v["version"]))
    return found


class Reader:
    """A trainer polling for what collectors just wrote, every `every_s`: the latest `steps`
    version and how many rows it holds, both from that version's manifest, as `Lake.sql`
    would check it out. No data file is read: a trainer then reads only the new fragments,
    each row once. (Querying every row at every poll instead made the store serve 3.6 GETs
    of steps data per step at 8 writers, 58% of all its requests: the reader, not the fleet,
    was loading the store.)"""

    def __init__(self, uri: str, every_s: float):
        from episodelake.lake.storage import layout  # noqa: PLC0415

        self.path = layout.table_path(Lake(uri).location, "steps")
        self.every_s = every_s
        self.polls: list[tuple[float, float, int, int]] = []  # (perf_counter, wall time, version, rows)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from episodelake.lake.storage import tables  # noqa: PLC0415

        while not self._stop.wait(self.every_s):
            try:
                ds = tables.dataset(self.path)
                self.polls.append((time.perf_counter(), time.time(), ds.version, ds.count_rows()))
            except Exception as exc:  # the store busy: the next poll tries again
                print(f"reader: {exc}", file=sys.stderr)

    def all_visible_at(self, total: int) -> float:
        """When the reader first saw `total` rows (perf_counter); inf if it never did."""
        return min((t for t, _, _, n in self.polls if n >= total), default=float("inf"))

    def seen_at(self, version: int) -> float | None:
        """The wall time of the first poll that found `version` or a later one."""
        return next((wall for _, wall, v, _ in self.polls if v >= version), None)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def fleet(uri: str, writers: int, steps: int, handoff: bool = True, store_pid: int | None = None,
          endpoint: str | None = None, machines: int = 1, spool_base: Path | None = None,
          given_ids: bool = False, rate: float = 0.0, stages: bool = False) -> dict:
    """One fleet run: `writers` recorder processes writing `steps` steps each at once,
    reaching the store at `endpoint` (a delaying proxy, or moto itself), played as
    `machines` machines (writer i on machine i % machines: its own spool root under
    `spool_base` and machine id). Returns the run's measures (see `measure_fleet`)."""
    before_rows = Lake(uri).sql("select count(*) n from steps")[0][0].as_py()  # the tables exist before the writers start
    before = _versions(uri)
    context = mp.get_context("spawn")  # Lance is not fork-safe
    start, out = context.Event(), context.Queue()
    envs = []
    for i in range(writers):
        env = {"BENCH_GIVEN_IDS": "1" if given_ids else "0", "BENCH_RATE": str(rate),
               "BENCH_STAGES": "1" if stages else "0"}
        if endpoint:
            env["AWS_ENDPOINT_URL"] = endpoint
        if machines > 1:
            assert spool_base is not None
            env["ELAKE_SPOOL"] = str(spool_base / f"machine-{i % machines}")
            env["ELAKE_MACHINE_ID"] = f"bench-machine-{i % machines}"
        envs.append(env)
    procs = [context.Process(target=_fleet_writer, args=(uri, i, steps, handoff, envs[i], start, out))
             for i in range(writers)]
    for p in procs:
        p.start()
    for _ in procs:
        assert out.get(timeout=600) == "ready"
    reader = Reader(uri, 0.2)
    cpu = CpuUse(store_pid)
    start.set()
    results = []
    while len(results) < len(procs):
        try:
            results.append(out.get(timeout=5))
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead and out.empty():
                reader.stop()
                raise RuntimeError(f"{len(dead)} writer process(es) failed (exit {dead[0].exitcode}); see above") from None
    used = cpu.read()
    deadline = time.monotonic() + 30
    while reader.all_visible_at(writers * steps) == float("inf") and time.monotonic() < deadline:
        time.sleep(0.1)  # closed: every row committed, so the reader's next poll sees them all
    reader.stop()
    for p in procs:
        p.join()
    begun = min(r["begun"] for r in results)
    acked = max(r["acknowledged"] for r in results)
    wall = max(r["closed"] for r in results) - begun
    total = writers * steps
    after = _versions(uri)
    visible = committed_at(uri, before["steps"])
    stored = Lake(uri).sql("select count(*) n from steps")[0][0].as_py() - before_rows
    assert stored == total, f"{stored} of {total} steps are in the lake after the run"
    acks = {(e, n): at for r in results for e, n, at in r["acks"]}
    delay = {key: visible[key][0] - at for key, at in acks.items() if key in visible}
    delays = list(delay.values())
    # each writer's first episode starts with every other writer's at once, with nothing of
    # the writer committed yet: the fleet's start-up, not its steady state
    first = {r["acks"][0][0] for r in results if r["acks"]}
    steady = [d for (e, _), d in delay.items() if e not in first]
    seen_at = {v: reader.seen_at(v) for v in {version for _, version in visible.values()}}
    seen = [seen_at[visible[key][1]] - at for key, at in acks.items()
            if key in visible and seen_at[visible[key][1]] is not None]
    by_step: dict[int, list[float]] = {}
    for (_, n), d in delay.items():
        by_step.setdefault(n, []).append(d)
    commits = sum(r["commits"] for r in results)
    return {
        "steps_s": total / wall,
        "acknowledged_steps_s": total / (acked - begun),
        "committed_steps_s": total / (reader.all_visible_at(total) - begun),
        "steps_commits_per_1000": (after["steps"] - before["steps"]) * 1000 / total,
        "all_commits_per_1000": sum(after[t] - before[t] for t in after) * 1000 / total,
        "cpu_ms_per_step": (sum(r["cpu_s"] for r in results) + used.get("store_cpu_s", 0.0)) * 1000 / total,
        "machine_busy": used["machine_busy"],
        "store_cpu_s_per_s": used.get("store_cpu_s_per_s", 0.0),
        "fresh_p50_ms": p50(delays) * 1000 if delays else float("nan"),
        "fresh_p99_ms": percentile(delays, 99) * 1000 if delays else float("nan"),
        "fresh_steady_p99_ms": percentile(steady, 99) * 1000 if steady else float("nan"),
        "seen_p99_ms": percentile(seen, 99) * 1000 if seen else float("nan"),
        "by_step": {n: (round(p50(d) * 1000), round(percentile(d, 90) * 1000)) for n, d in sorted(by_step.items())},
        "by_quarter": _by_quarter(acks, delay),
        "parts": freshness_parts(results, acks, delay),
        "conflict_retries_per_1000_commits": sum(r["conflict_retries"] for r in results) * 1000 / max(commits, 1),
        **{f"max_{k}_ms": max(r["slowest_ms"][k] for r in results) for k in ("open", "start", "log_step", "finish")},
        "stages": {k: [sum(r["stages"].get(k, [0, 0, 0])[i] for r in results) for i in range(3)]
                   for k in sorted({k for r in results for k in r["stages"]})},
    }


def _by_quarter(acks: dict[tuple[str, int], float], delay: dict[tuple[str, int], float]) -> list[str]:
    """Freshness p50/p99 ms of the steps acknowledged in each quarter of the run: whether it
    holds as the tables grow."""
    if not delay:
        return []
    first, last = min(acks.values()), max(acks.values())
    span = max(last - first, 1e-9)
    quarters: list[list[float]] = [[], [], [], []]
    for key, d in delay.items():
        quarters[min(int((acks[key] - first) / span * 4), 3)].append(d)
    return [f"{p50(q) * 1000:.0f}/{percentile(q, 99) * 1000:.0f}" if q else "-" for q in quarters]


def _median_run(runs: list[dict]) -> dict:
    """The run with the median committed steps/s, with its own measures (one run says little
    on a shared machine)."""
    return sorted(runs, key=lambda r: r["committed_steps_s"])[len(runs) // 2]


def _proxy(target_port: int, latency_ms: float) -> tuple[subprocess.Popen, str]:
    """A delaying proxy in its own process (tests/remote/proxy.py)."""
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-m", "tests.remote.proxy", str(target_port), str(latency_ms)],
                            cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, f"http://127.0.0.1:{proc.stdout.readline().strip()}"


def measure_fleet(args, tmp: Path, bucket, server: S3Server) -> None:
    """The fleet rows: committed steps/s (the steps over the time until a reader polling
    the latest `steps` version every 0.2 s saw every one of them; `Lake.sql` counts them after) beside acknowledged steps/s (over the time
    until the last `log_step` returned);
    commits per 1,000 steps; CPU per step (the writer processes' and the S3 server's CPU over
    the steps: the work the fleet costs, whatever the cores allow); freshness (p50/p99 from a
    step's `log_step` returning to the commit of the version holding it, `committed_at`;
    `seen_p99_ms` to the polling reader seeing it); the slowest recorder call of any
    writer. With `--store-latency-ms`, every writer reaches the store through a proxy that
    delays each request (a bucket tens of milliseconds away); moto itself answers in about a
    millisecond. Rows: writers in one process group (one machine: one committer), then
    `--machines` machines of 2 writers (own spool roots and machine ids, one committer each),
    then the baseline of writers committing their own batches (handoff=False)."""
    latencies = [0.0] + ([args.store_latency_ms] if args.store_latency_ms else [])
    counts = [int(w) for w in args.fleet_writers.split(",")]
    for latency in latencies:
        proxy, endpoint = _proxy(server.port, latency) if latency else (None, None)
        try:
            configs = [("one machine", w, 1, True, 0.0) for w in counts]
            if args.machines > 1:
                configs.append((f"{args.machines} machines x 2", args.machines * 2, args.machines, True, 0.0))
            if args.fleet_baseline:
                configs += [("handoff=False", w, 1, False, 0.0) for w in sorted({counts[0], counts[-1]})]
            if args.fleet_rate:  # a collector's pace: freshness as a trainer would see it
                configs += [(f"{args.fleet_rate:g} steps/s each", w, 1, True, args.fleet_rate)
                            for w in sorted({counts[0], counts[-1]})]
            runs: dict[tuple, list[dict]] = {c: [] for c in configs}
            for r in range(args.fleet_repeat):  # interleaved: a slow spell of the machine hits every row
                for c in configs:
                    _, w, machines, handoff, rate = c
                    runs[c].append(fleet(bucket(), w, args.fleet_steps, handoff, server.proc.pid, endpoint,
                                         machines, tmp / f"spools-{latency}-{r}-{w}-{machines}",
                                         args.fleet_given_ids, rate, args.stages))
            for c in configs:
                what, w, machines, handoff, rate = c
                m = _median_run(runs[c])
                # against one writer of the same kind: paced rows against the paced writer
                one = _median_run(runs.get((what, counts[0], 1, handoff, rate), runs[configs[0]]))
                line(f"fleet {latency:.0f} ms store, {what}, {w} writer(s), {args.fleet_steps} steps each",
                     committed_steps_s=m["committed_steps_s"], acknowledged_steps_s=m["acknowledged_steps_s"],
                     committed_vs_1_writer=m["committed_steps_s"] / one["committed_steps_s"],
                     steps_s_to_close=m["steps_s"],
                     commits_per_1000_steps=m["all_commits_per_1000"],
                     steps_commits_per_1000=m["steps_commits_per_1000"],
                     commits_vs_1_writer=m["all_commits_per_1000"] / one["all_commits_per_1000"],
                     cpu_ms_per_step=m["cpu_ms_per_step"],
                     cpu_per_step_vs_1_writer=m["cpu_ms_per_step"] / one["cpu_ms_per_step"],
                     machine_busy=m["machine_busy"], store_cpu_s_per_s=m["store_cpu_s_per_s"],
                     fresh_p50_ms=m["fresh_p50_ms"], fresh_p99_ms=m["fresh_p99_ms"],
                     fresh_steady_p99_ms=m["fresh_steady_p99_ms"], seen_p99_ms=m["seen_p99_ms"],
                     conflict_retries_per_1000_commits=m["conflict_retries_per_1000_commits"],
                     max_open_ms=m["max_open_ms"], max_start_ms=m["max_start_ms"],
                     max_log_step_ms=m["max_log_step_ms"], max_finish_ms=m["max_finish_ms"])
                if args.stages:  # freshness p50/p90 ms by the step's place in its episode, then
                    # per 1,000 steps: wall ms, CPU ms, calls, of every writer process
                    line(f"  freshness by step of episode, {what}, {w} writer(s)",
                         **{f"step{n}": f"{v[0]}/{v[1]}" for n, v in m["by_step"].items()})
                    line(f"  freshness parts, {what}, {w} writer(s)", **m["parts"])
                    line(f"  freshness p50/p99 ms by quarter of the run, {what}, {w} writer(s)",
                         **{f"q{i + 1}": v for i, v in enumerate(m["by_quarter"])})
                    per = 1000 / (w * args.fleet_steps)
                    line(f"  stages per 1,000 steps, {what}, {w} writer(s)",
                         **{k: f"{v[0] * 1000 * per:.0f}/{v[1] * 1000 * per:.0f}ms/{v[2] * per:.1f}"
                            for k, v in m["stages"].items() if v[2]})
        finally:
            if proxy is not None:
                proxy.stdin.close()
                proxy.wait(30)


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
    ap.add_argument("--fleet-writers", default="1,2,4,8", help="writer counts of the one-machine fleet rows")
    ap.add_argument("--store-latency-ms", type=float, default=0.0,
                    help="also run the fleet rows through a proxy that delays each request this long")
    ap.add_argument("--machines", type=int, default=4,
                    help="the many-machines row: this many machines of 2 writers each (0: no such row)")
    ap.add_argument("--fleet-rate", type=float, default=20.0,
                    help="the paced rows: steps/s per writer (a busy collector), for freshness; 0: none")
    ap.add_argument("--no-fleet-baseline", dest="fleet_baseline", action="store_false",
                    help="leave out the handoff=False rows")
    ap.add_argument("--fleet-given-ids", action="store_true",
                    help="every other fleet episode with an id the caller gives (claimed provisionally)")
    ap.add_argument("--stages", action="store_true",
                    help="fleet rows: also print freshness p50/p90 ms by step of episode and split into its "
                         "parts (before the upload, the upload, to the commit), and each engine "
                         "stage's wall/CPU ms and calls per 1,000 steps")
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
                measure_fleet(args, tmp, bucket, server)
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
    """The recorder-call rows: the same steps with the store up, refused and hung (module docstring)."""
    up = log_step_ms(bucket(), screens, args.outage, None)
    proxy = TcpProxy(int(server.endpoint.rsplit(":", 1)[1]))
    os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
    try:
        down = {mode: log_step_ms(bucket(), screens, args.outage, proxy, mode) for mode in ("refused", "hung")}
    finally:
        os.environ["AWS_ENDPOINT_URL"] = server.endpoint
        proxy.close()
    for what, run in [(f"store {mode} {args.outage:.0f} s", r) for mode, r in down.items()] + [("store up (same run)", up)]:
        t = run["times"]
        line(f"recorder calls, {what} (default options)", open_ms=max(t["open"]),
             start_minted_max_ms=max(t["minted"]), start_given_max_ms=max(t["given"], default=0.0),
             finish_max_ms=max(t["finish"]), log_step_p50_ms=p50(t["log_step"]),
             log_step_p99_ms=percentile(t["log_step"], 99), log_step_max_ms=max(t["log_step"]),
             episodes=run["episodes"], steps=run["steps"], stored_once=run["once"],
             lost_or_doubled=run["steps"] - run["once"])


if __name__ == "__main__":
    main()
