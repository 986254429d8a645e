"""`LakeLoader`: a DataLoader over `sft_dataset` whose saved position is exact with workers.

A DataLoader hands back its workers' batches in turn (worker 0, 1, ..., N-1, 0, ...: its
`in_order` default). `LakeLoader` tells the dataset, before the workers start, where the
pass starts and the batch size; each worker then reads batch k, k + N, k + 2N... of the
single order (`data.worker_share`), so the batches arrive in exactly the order one process
would yield, and this process knows which samples reached the training loop by counting the
batches it handed over. `ds.state_dict()` is that count (plus each worker's share of it, for
the record), and a resume starts every worker after it, with any number of workers and any
batch size.

Refused, naming the argument: `persistent_workers=True` (the workers would keep the previous
pass's start and epoch), `in_order=False` (batches in the order they finish), and samplers
(an iterable dataset has none).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import DataLoader

from episodelake.lake.storage.errors import InvalidInput


class LakeLoader(DataLoader):
    """`ds.loader(batch_size=..., num_workers=..., **DataLoader arguments)`; see the module."""

    def __init__(self, dataset: Any, batch_size: int | None = 1, num_workers: int = 0,
                 **kwargs: Any):
        for name, refused in (("persistent_workers", True), ("in_order", False)):
            if kwargs.get(name, not refused) is refused:
                raise InvalidInput(f"{name}: {refused} would break the saved position of ds.loader(...); "
                                   "leave it at its default")
        for name in ("sampler", "batch_sampler", "shuffle"):
            if kwargs.get(name) not in (None, False):
                raise InvalidInput(f"{name}: the lake dataset orders itself (seed, shuffle_buffer, "
                                   "set_epoch); leave it out")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise InvalidInput(f"num_workers: a whole number from 0, not {num_workers!r}")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise InvalidInput(f"batch_size: a whole number from 1 (or None), not {batch_size!r}")
        kwargs.setdefault("collate_fn", dataset.collate if batch_size is not None else None)
        super().__init__(dataset, batch_size=batch_size, num_workers=num_workers, **kwargs)

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]  # a generator over the DataLoader's iterator, which counts what it hands over
        ds: Any = self.dataset  # a LakeSftDataset (not imported: it imports this module)
        chunk = self.batch_size or 1
        start = ds._start()
        total, epoch, workers = len(ds), ds.epoch, max(1, self.num_workers)
        ds._unseen[0] = 0  # a plain DataLoader's earlier pass no longer matters
        ds._pass = {"start": start, "chunk": chunk}
        try:  # iter(dataset) runs now: in this process, or in workers that copy the dataset
            batches = super().__iter__()
        finally:
            ds._pass = None
        handed = start

        def note(done: int) -> None:
            ds._position = {"epoch": epoch, "yielded": done,
                            "workers": _shares(start, done, chunk, workers, self.batch_size)}

        note(start)
        for batch in batches:
            handed = min(total, handed + chunk)
            note(handed)
            yield batch
        note(total)  # the pass is over (a last partial batch dropped by drop_last included)


def _shares(start: int, done: int, chunk: int, workers: int, batch_size: int | None) -> dict[str, Any]:
    """Each worker's position in the pass: samples of the order it has handed over."""
    handed = [0] * workers
    for k, first in enumerate(range(start, done, chunk)):
        handed[k % workers] += min(chunk, done - first)
    return {"num_workers": workers, "batch_size": batch_size, "start": start, "yielded": handed}
