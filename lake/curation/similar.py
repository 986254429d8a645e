"""Screens like this one: nearest screenshots by embedding, and near-duplicates in exports.

Each step's `embedding` (a unit-length float32 vector of its screenshot, filled by `elake
enrich --what embed`) is searched with Lance's vector search, across every episode, run and
policy version of the lake. Distances are Euclidean (0: the same screen; at most 2); Lance
reports squared L2, which is turned into that here.

Up to `INDEX_MIN_ROWS` embedded steps a search is an exact flat scan (about 25 ms at that size);
from there `refresh_index` builds an IVF_PQ index (`INDEX_NAME`) and later folds in rows that
arrived since, and a search probes `NPROBES` partitions and re-ranks `REFINE_FACTOR` times
its candidates by their exact vectors. Rows the index does not cover yet (steps enriched
since the last refresh) are still searched, by a flat scan beside the index.

`where` narrows the neighbours with an SQL condition over `episodes e JOIN steps s`, run in
the lake's sandbox like every condition a page may send. It is applied to the nearest
candidates, whose number grows fourfold until `k` neighbours pass it or `MAX_CANDIDATES` were read.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass

import lance
import numpy as np

from episodelake.lake.curation.search import matching_steps
from episodelake.lake.storage import tables
from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.sql import sql_in, sql_string

COLUMN = "embedding"
INDEX_NAME = "embedding_ivf_pq"
#: Embedded steps from which a vector index is built; below, a flat scan costs less than the build.
INDEX_MIN_ROWS = 10_000
#: Product quantisation trains 256 centroids per sub-vector: fewer rows leave Lance's index empty.
PQ_TRAIN_ROWS = 256
#: IVF partitions a search probes (of about sqrt(rows)), and how many times `k` candidates
#: are re-ranked by their exact vectors.
NPROBES = 20
REFINE_FACTOR = 10
MAX_K = 1_000
MAX_CANDIDATES = 20_000
ENRICH_HINT = "`elake enrich --what embed` computes it"


@dataclass(frozen=True)
class Neighbour:
    episode_id: str
    step: int
    distance: float


def embedding_of(lake: Lake, episode_id: str, step: int) -> np.ndarray:
    """The stored embedding of one step; NotFound names the enrichment that fills it."""
    ds = lake.dataset("steps")
    if COLUMN not in ds.schema.names:  # a lake opened read-only before the column existed
        raise NotFound(f"the lake's steps have no embedding column yet; {ENRICH_HINT}")
    rows = ds.to_table(columns=[COLUMN],
                       filter=f"episode_id = {sql_string(episode_id)} AND step = {int(step)}").to_pylist()
    if not rows:
        raise NotFound(f"episode {episode_id!r} has no step {step}")
    vector = rows[-1][COLUMN]
    if vector is None:
        raise NotFound(f"episode {episode_id!r} step {step} has no embedding yet; {ENRICH_HINT}")
    return np.asarray(vector, dtype=np.float32)


def similar(lake: Lake, episode_id: str, step: int, *, k: int = 10, where: str | None = None) -> list[Neighbour]:
    """The `k` steps whose screenshots are nearest to this step's, nearest first (the step
    itself left out; identical screens of other steps are at distance 0)."""
    if not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InvalidInput(f"k must be 1..{MAX_K}, not {k!r}")
    if not isinstance(step, int) or step < 0:
        raise InvalidInput(f"step must be a non-negative integer, not {step!r}")
    query = embedding_of(lake, episode_id, step)
    condition = where if where is not None and where.strip() else None
    wanted = k + 1  # the step itself comes back too
    steps = lake.dataset("steps")
    while True:
        candidates = nearest(steps, query, wanted)
        found = [n for n in candidates if (n.episode_id, n.step) != (episode_id, step)]
        if condition is not None:  # run even on no candidate, so a bad condition is an error
            allowed = matching_steps(lake, condition, sorted({n.episode_id for n in found}))
            found = [n for n in found if (n.episode_id, n.step) in allowed]
        if len(found) >= k or len(candidates) < wanted or wanted >= MAX_CANDIDATES:
            return found[:k]
        wanted = min(MAX_CANDIDATES, wanted * 4)


def nearest(ds: lance.LanceDataset, vector: np.ndarray, k: int) -> list[Neighbour]:
    """The `k` embedded steps of `ds` nearest to `vector` (the index when there is one)."""
    found = ds.to_table(columns=["episode_id", "step", "_distance"],
                        nearest={"column": COLUMN, "q": vector, "k": k, "metric": "l2",
                                 "nprobes": NPROBES, "refine_factor": REFINE_FACTOR})
    return [Neighbour(e, s, math.sqrt(max(0.0, d)))
            for e, s, d in zip(found["episode_id"].to_pylist(), found["step"].to_pylist(),
                               found["_distance"].to_pylist(), strict=True)]


def refresh_index(lake: Lake, *, min_rows: int = INDEX_MIN_ROWS) -> str:
    """Build the vector index once `min_rows` steps are embedded, or fold the rows it does
    not cover into it; returns `built`, `updated` or `flat` (too few rows for an index)."""
    lake.check_writable()
    out = tables.retry_commit("index steps.embedding", functools.partial(_refresh, lake, min_rows))
    lake.invalidate("steps")
    return out


def _refresh(lake: Lake, min_rows: int) -> str:
    ds = tables.open_table(lake.path, "steps")
    if tables.has_index(ds, INDEX_NAME):
        ds.optimize.optimize_indices(index_names=[INDEX_NAME])
        return "updated"
    rows = ds.count_rows(filter=f"{COLUMN} IS NOT NULL")
    if rows < max(min_rows, PQ_TRAIN_ROWS):
        return "flat"
    partitions = max(1, min(1024, round(math.sqrt(rows))))
    ds.create_index(COLUMN, index_type="IVF_PQ", name=INDEX_NAME, metric="l2",
                    num_partitions=partitions, num_sub_vectors=_sub_vectors(ds.schema.field(COLUMN).type.list_size))
    return "built"


def _sub_vectors(dim: int) -> int:
    """PQ sub-vectors of 16 dimensions each (32 for 512): 32 bytes a row in the index."""
    return max(1, dim // 16)


def stored_embeddings(ds: lance.LanceDataset, episode_ids: Iterable[str],
                      field: str) -> dict[tuple[str, int], np.ndarray]:
    """(episode_id, step) -> embedding for these episodes' steps, read 1,000 episodes a scan.
    NotFound, naming `field` (what asked) and the enrichment, when a step with a screenshot
    has none yet; steps without a screenshot have none and are absent."""
    ids = sorted(set(episode_ids))
    if COLUMN not in ds.schema.names:
        raise NotFound(f"{field}: the steps have no embedding column yet; {ENRICH_HINT}")
    out: dict[tuple[str, int], np.ndarray] = {}
    for start in range(0, len(ids), 1000):
        chunk = sql_in("episode_id", ids[start:start + 1000])
        missing = ds.count_rows(filter=f"{chunk} AND image_sha256 IS NOT NULL AND {COLUMN} IS NULL")
        if missing:
            raise NotFound(f"{field}: {missing} selected step(s) have no embedding yet; {ENRICH_HINT}")
        rows = ds.to_table(columns=["episode_id", "step", COLUMN], filter=f"{chunk} AND {COLUMN} IS NOT NULL")
        vectors = rows[COLUMN].combine_chunks()
        matrix = vectors.flatten().to_numpy(zero_copy_only=False).reshape(len(vectors), vectors.type.list_size)
        keys = zip(rows["episode_id"].to_pylist(), rows["step"].to_pylist(), strict=True)
        out.update(zip(keys, matrix, strict=True))
    return out


def has_index(lake: Lake) -> bool:
    return tables.has_index(lake.dataset("steps"), INDEX_NAME)


class NearDuplicates:
    """Which steps an export drops as near-duplicates: a step within `threshold` of a step
    already kept in the same group (the task: one screen calls for the same action within a
    task, not across tasks) is dropped. The selection's embeddings are read once, up front, so
    a step lacking one stops the export before any sample is written."""

    def __init__(self, source: Lake, threshold: float):
        if not math.isfinite(threshold) or threshold < 0:
            raise InvalidInput(f"dedupe_similar must be a distance of 0 or more, not {threshold}")
        self.source = source
        self.threshold = threshold
        self._kept: dict[str, tuple[np.ndarray, int]] = {}  # group -> (rows, how many used)
        self._vectors: dict[tuple[str, int], np.ndarray] = {}

    def load(self, episode_ids: Iterable[str]) -> None:
        """Read the embeddings of these episodes' steps (call before asking about them)."""
        self._vectors.update(stored_embeddings(self.source.dataset("steps"), episode_ids, "dedupe_similar"))

    def seen(self, group: str, episode_id: str, step: int | None) -> bool:
        """True when the step is a near-duplicate of a kept one of `group`; else keeps it."""
        vector = None if step is None else self._vectors.get((episode_id, step))
        if vector is None:  # an episode sample, or a step whose screenshot was lost: kept
            return False
        kept, used = self._kept.get(group, (np.empty((16, len(vector)), np.float32), 0))
        if used and float(np.linalg.norm(kept[:used] - vector, axis=1).min()) <= self.threshold:
            return True
        if used == len(kept):
            kept = np.concatenate([kept, np.empty_like(kept)])
        kept[used] = vector
        self._kept[group] = (kept, used + 1)
        return False
