"""`elake enrich`: the derived columns of stored steps (`lake.derive.derivations`) filled as
a job over the lake.

The job (kind ``enrich``, `lake.jobs`) reports progress in screenshots and shows a progress
bar; bulk work runs in a process pool (`workers`, one single-threaded model per process) or,
for a lake on object storage, as Ray tasks that read the screenshots from the store
themselves (`bulk.run_parts`, like `export sft --ray`), the driver writing every commit. At
the end the full-text indexes take in the new text (`lake.search.refresh_indexes`) and the
vector index the new embeddings (`lake.similar.refresh_index`, built once there are enough
of them).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from episodelake.collectors.jobs.bulk import RayOptions, run_parts
from episodelake.lake.curation.search import refresh_indexes
from episodelake.lake.curation.similar import refresh_index
from episodelake.lake.derive.derivations import (
    DERIVATIONS,
    EnrichReport,
    Scope,
    derivations,
    derive,
    enrich_anchor_keys,
    fill,
)
from episodelake.lake.ops.jobs import Job
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.sql import condition

#: The registry and the trainer's and demo's entry points live with the derivations.
__all__ = ["DERIVATIONS", "EnrichReport", "derive", "enrich", "enrich_anchor_keys"]

def enrich(lake: Lake, what: Sequence[str] | None = None, *, where: str | None = None,
           workers: int = 1, job: Job | None = None, progress: bool = False,
           ray: RayOptions | None = None) -> EnrichReport:
    """Fill the derived columns of `what` (default all) for the steps that lack them, of
    the steps meeting `where` (an SQL condition over `episodes e JOIN steps s`) or all; with
    `ray` enabled the screenshots are read and computed in Ray tasks (a lake on object storage
    is read by the cluster, not pulled through this machine)."""
    chosen = derivations(what)
    if workers < 1:
        raise InvalidInput(f"workers must be at least 1, not {workers}")
    if where is not None:
        condition(where, "where")  # refused before a job starts
    lake.check_writable()
    job = job or Job(lake, "enrich", params={"what": [d.name for d in chosen], "where": where,
                                             "workers": workers, "ray": bool(ray and ray.enabled)})
    with job.recording():
        run = functools.partial(run_parts, ray=ray) if ray is not None and ray.enabled else None
        report = fill(lake, chosen, Scope(where=where), workers=workers, job=job, progress=progress,
                      run=run)
        if any(report.steps.values()):
            report.indexes = refresh_indexes(lake)
            if report.steps.get("embed"):
                report.indexes["embedding"] = refresh_index(lake)
        job.result = report.result()
    return report
