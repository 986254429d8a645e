"""Bulk work over stored episodes on a Ray cluster: exports, re-keying anchors, judge back-fill.

Each of these jobs is a pure function of parts of the lake (a chunk of episodes, a fragment
of the steps table) followed by one ordered step (writing an export's files, one
``merge_insert`` of the new column values). `run_parts` runs the pure part: in this process
by default, or as Ray tasks (`RayOptions`) on the cluster at ``--ray-address``, so the
two paths share every line of the work and give the same result. Results come back in the
order of the parts, with a bounded number of tasks in flight, so a driver writing an export
never holds more than a window of episodes.

Ray tasks read the lake themselves (a Lance dataset pickles as its URI, version and storage
options; a `Location` as its URI and options), so only the small inputs and the results
travel, and workers need no storage variables of their own: the options the driver opened
the lake with go with the parts, through Ray's object store. Writes stay with the lake's own
paths: an export's folder is written by the driver, and column updates go through
`lake.updates.update_columns` (a retried ``merge_insert`` commit), never a commit of our own.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from pydantic import Field

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.vocab.spec_model import SpecModel

log = logging.getLogger(__name__)

P = TypeVar("P")
R = TypeVar("R")


class RayOptions(SpecModel):
    """Where a job's parallel work runs; every command that has it takes `--ray` and
    `--ray-address`."""

    ray: bool = Field(False, description="run the parallel work on Ray (a local cluster unless "
                      "--ray-address names one)")
    ray_address: str | None = Field(None, description="an existing Ray cluster, e.g. "
                                    "ray://head:10001 or auto (implies --ray)")

    @property
    def enabled(self) -> bool:
        return self.ray or self.ray_address is not None


def connect_ray(address: str | None) -> Any:
    """The `ray` module, connected to the cluster at `address` (or to a new local one)."""
    try:
        import ray
    except ImportError:
        raise InvalidInput("--ray needs Ray: pip install 'ray[default]' (the ray extra)") from None
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, configure_logging=False)
    return ray


def run_parts(work: Callable[..., R], parts: Sequence[P], *shared: Any,
              ray: RayOptions | None = None, window: int | None = None) -> Iterator[R]:
    """`work(part, *shared)` for each part, yielded in the order of `parts`. With `ray`
    enabled each call is a Ray task (`shared` is put in the object store once); at most
    `window` tasks are in flight (default: twice the cluster's CPUs)."""
    if ray is None or not ray.enabled:
        for part in parts:
            yield work(part, *shared)
        return
    ray_module = connect_ray(ray.ray_address)
    task = ray_module.remote(_apply)
    refs = [ray_module.put(value) for value in (work, *shared)]
    limit = window or max(2, 2 * int(ray_module.cluster_resources().get("CPU", 1)))
    pending: deque = deque()
    todo = iter(parts)
    while True:
        while len(pending) < limit:
            item = next(todo, _END)
            if item is _END:
                break
            pending.append(task.remote(refs[0], item, *refs[1:]))
        if not pending:
            return
        yield ray_module.get(pending.popleft())


_END = object()


def _apply(work: Callable[..., R], part: Any, *shared: Any) -> R:
    return work(part, *shared)


def chunks(items: Sequence[P], size: int) -> list[Sequence[P]]:
    if size < 1:
        raise InvalidInput(f"chunk size must be at least 1, got {size}")
    return [items[start:start + size] for start in range(0, len(items), size)]


# --- exports ----------------------------------------------------------------------------------

#: Episodes per export task: enough to amortise a task's start, few enough to spread.
EXPORT_EPISODES_PER_TASK = 8


def _prepare_chunk(episodes: Sequence[Any], spec: Any, steps: Any) -> list[Any]:
    from episodelake.lake.export.job import prepare_episode

    return [prepare_episode(episode, spec, steps) for episode in episodes]


def export_prepare(ray: RayOptions, episodes_per_task: int = EXPORT_EPISODES_PER_TASK):
    """An export `Prepare` that builds samples and reads (and downscales) screenshots in Ray
    tasks, a chunk of episodes each, at the version of the steps table the selection read;
    without Ray, the export's own `prepare_here`."""
    from episodelake.lake.export.job import PreparedEpisode, prepare_here
    from episodelake.lake.export.selection import Selection
    from episodelake.lake.export.spec import ExportSpec

    def prepare(selection: Selection, spec: ExportSpec) -> Iterator[PreparedEpisode]:
        steps = selection.source.dataset("steps")
        if steps.version != selection.versions["steps"]:
            steps = steps.checkout_version(selection.versions["steps"])
        parts = chunks(selection.episodes, episodes_per_task)
        for prepared in run_parts(_prepare_chunk, parts, spec, steps, ray=ray):
            yield from prepared

    return prepare if ray.enabled else prepare_here
