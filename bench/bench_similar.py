"""Similarity: "screens like this one" over a 300,000-step lake, and embedding throughput.

Throughput: `elake enrich --what embed`'s function on simulated-phone PNGs (decode included),
one core, against the perceptual hash the recorder computes at write time.

Query: a steps table of `--steps` rows whose embeddings are synthetic but shaped like real
ones: each row is one of the embeddings of real sim screens (noisy demo rollouts), moved by
Gaussian noise (`--noise`: its expected length; 0.002 by default, below the 0.005 that
separates the nearest distinct sim states, as lossless captures are) and scaled back to unit
length, so the lake holds clusters of near-identical screens as a real one does. Recording and embedding 300,000
real screenshots would take hours on this machine; the search cost depends only on the
vectors. `lake.similar.similar` (from a stored step, the neighbours' keys out) is timed with
the IVF_PQ index that `refresh_index` builds and with a flat scan (no index, the same run).
Two qualities are printed: recall@10 of the index against the flat scan's exact answer (low
by nature here: each screen has hundreds of copies a noise apart, so the exact ten are a
draw among near-ties), and the share of the ten neighbours that show the query's screen
(screens: the sim screenshots' embeddings at distance 0 from each other count as one).

    python bench/bench_similar.py [--steps 300000] [--queries 50]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa
from common import latencies_ms, line, p50, percentile, workdir

from episodelake.collectors.agents.oracle import DemoPolicy, NoiseConfig
from episodelake.collectors.envs.sim.phone import Phone
from episodelake.collectors.envs.sim.tasks import sample_tasks
from episodelake.collectors.jobs.enrich import derive
from episodelake.lake import Lake
from episodelake.lake.curation import similar
from episodelake.lake.derive.embedding import embedding_anchor_keys
from episodelake.lake.storage import schema, tables
from episodelake.lake.vocab.seeds import derive as derive_seed

NOISE = NoiseConfig(grounding=0.12, planning=0.10, premature_terminate=0.0, loop=0.05)
STEPS_PER_EPISODE = 20


def sim_screens(tasks: int, seed: int = 3) -> list[bytes]:
    out = []
    for g, task in enumerate(sample_tasks(tasks, seed)):
        for r in range(2):
            episode_seed = derive_seed(seed, "episode", g, r)
            phone = Phone(episode_seed)
            task.setup(phone)
            policy = DemoPolicy(task, NOISE, episode_seed)
            for _ in range(15):
                out.append(phone.screenshot())
                if phone.step(policy.decide(phone).arguments).done:
                    break
    return out


def throughput(images: list[bytes], name: str) -> float:
    start = time.perf_counter()
    for image in images:
        derive(name, image)
    return len(images) / (time.perf_counter() - start)


def build(lake: Lake, base: np.ndarray, steps: int, noise: float) -> np.ndarray:
    """Write the synthetic steps; returns each row's screen (its row of `base`)."""
    rng = np.random.default_rng(11)
    chunk = 50_000
    screens = rng.integers(0, len(base), steps)
    for start in range(0, steps, chunk):
        n = min(chunk, steps - start)
        rows = np.arange(start, start + n)
        vectors = base[screens[start:start + n]] + rng.normal(0, noise / np.sqrt(base.shape[1]),
                                                                   (n, base.shape[1])).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        cols = {name: pa.nulls(n, schema.STEPS.field(name).type) for name in schema.STEPS.names}
        cols["episode_id"] = pa.array([f"ep{r // STEPS_PER_EPISODE:06d}" for r in rows])
        cols["step"] = pa.array(rows % STEPS_PER_EPISODE, pa.int32())
        cols["embedding"] = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()),
                                                              base.shape[1])
        cols["embedding_version"] = pa.array(np.ones(n, np.int32))
        tables.commit(lake.path, "steps", pa.table(cols, schema=schema.STEPS), "append")
        episodes = sorted({f"ep{r // STEPS_PER_EPISODE:06d}" for r in rows})
        tables.commit(lake.path, "episodes", schema.conform("episodes", [
            {"episode_id": e, "task_name": f"task_{i % 40}", "status": "finished"}
            for i, e in enumerate(episodes)]), "append")
    lake.invalidate()
    return screens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--noise", type=float, default=0.002)
    parser.add_argument("--tasks", type=int, default=12)
    args = parser.parse_args()

    images = sim_screens(args.tasks)
    embed, phash = throughput(images, "embed"), throughput(images, "phash")
    line("similar: embed throughput", steps_per_s=embed, phash_steps_per_s=phash,
         ratio=f"{phash / embed:.2f}x the phash cost", screens=len(images))
    base = np.stack([np.asarray(derive("embed", image)["embedding"], np.float32) for image in images])
    labels = np.asarray(embedding_anchor_keys(list(base), 0.0))  # one label per distinct screen

    with workdir("similar") as d:
        lake = Lake(d / "lake")
        start = time.perf_counter()
        screens = build(lake, base, args.steps, args.noise)
        line("similar: lake built", steps=args.steps, seconds=time.perf_counter() - start)
        rng = np.random.default_rng(5)
        rows = rng.integers(0, args.steps, args.queries)
        picks = [(f"ep{r // STEPS_PER_EPISODE:06d}", int(r % STEPS_PER_EPISODE)) for r in rows]

        def same_screen(found: list[list[tuple[str, int]]]) -> float:
            """Share of neighbours showing the query's screen (what a user looks for)."""
            hits = [labels[screens[int(e[2:]) * STEPS_PER_EPISODE + s]] == labels[screens[r]]
                    for r, near in zip(rows, found, strict=True) for e, s in near]
            return float(np.mean(hits))

        def run_all() -> list[list[tuple[str, int]]]:
            return [[(n.episode_id, n.step) for n in similar.similar(lake, e, s, k=10)] for e, s in picks]

        exact = run_all()
        it = iter(picks * 10)
        flat = latencies_ms(lambda: similar.similar(lake, *next(it), k=10), args.queries)
        start = time.perf_counter()
        status = similar.refresh_index(lake, min_rows=1)
        line("similar: index", status=status, seconds=time.perf_counter() - start)
        approx = run_all()
        recall = np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(approx, exact, strict=True)])
        it = iter(picks * 10)
        indexed = latencies_ms(lambda: similar.similar(lake, *next(it), k=10), args.queries)
        line(f"similar: k=10 over {args.steps:,} steps", p50_ms=p50(indexed),
             p99_ms=percentile(indexed, 99), flat_p50_ms=p50(flat), speedup=f"{p50(flat) / p50(indexed):.1f}x",
             recall_at_10=f"{recall:.3f}", same_screen_at_10=f"{same_screen(approx):.3f}",
             flat_same_screen_at_10=f"{same_screen(exact):.3f}")


if __name__ == "__main__":
    main()
