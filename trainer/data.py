"""Train straight from the lake: `sft_dataset`, a PyTorch `IterableDataset` of SFT samples.

```python
from episodelake.lake import Lake
from episodelake.trainer.data import sft_dataset

ds = sft_dataset(Lake("elake-data"), set="good-runs", history_images=2, version="v1",
                 rank=rank, world_size=world_size, seed=0)
for batch in ds.loader(batch_size=4, num_workers=2):   # a DataLoader; batch["samples"]
    ...
    state = ds.state_dict()   # exact, workers or not
```

What it yields is exactly what the SFT exports write (`episodelake.lake.export`): the
selection is the export's (`selection.select`: a set, a SQL condition, the success filter,
read at a tag or versions), the samples are the export's (`samples.samples`: the collectors'
prompt builder, the same history window, one image part per screenshot, in order), and
duplicates are dropped as an export drops them (first occurrence in the selection's order
kept). `tests/trainer/test_data.py` compares every sample with a llamafactory export of the
same selection. Each sample is a dict: `messages` (content parts; an image part is
``{"type": "image"}``), `images` (PIL images opened lazily from the `image` blobs: bytes are
read when the sample is emitted and pixels decoded when first used), `image_sha256`,
`episode_id`, `step`, `task`, `key`. With a Hugging Face `processor` (anything with
`apply_chat_template` and `__call__(text=, images=, return_tensors="pt")`) it yields that
processor's tensors for the whole conversation instead, with `labels` that train only the
last assistant turn (the step's response; for an episode sample, its last step).

With `images="rgb"` the images are decoded, read-only RGB numpy arrays instead of lazy PIL
images (see `trainer/data_read.py`: a screenshot shown by several samples is decoded once
while it stays in the cache).

What Lance does here, and what this module does itself:
- the ranks' shares: the selected episodes, split by a hash of `episode_id` (sha256) into
  `world_size` splits and shuffled with `seed`. Splits are disjoint and cover every
  episode, and an episode keeps its rank as the lake grows (the split is a hash of its id).
  Hash splits are not exactly even: ranks get different numbers of samples (a DDP loop
  should stop all ranks at the smallest `len(ds)`, or pad). Not a LanceDB permutation any
  more: importing LanceDB took 2.3 s of every dataset's first batch, its bundled Lance
  logged a warning per use for key indexes written by this Lance (a newer index version
  than it reads), and the split and shuffle of a few thousand ids take microseconds here.
  Not LanceDB's `StreamingDataset` nor `split_random(fixed=N)` either: both drop the rows
  past a multiple of the split count, so some episodes would never be read.
- screenshots: `LanceDataset.take_blobs` on the steps version read, one call per block of
  upcoming samples, only for the samples emitted, never a table scan (`data_read.py`). Not
  `lance.torch.data.LanceDataset`: it shards by fragment or batch of rows, and a sample
  needs its whole episode (history), so shards must be episodes.
- order and resuming: one order of sample positions per (seed, epoch, rank) — a shuffle
  buffer of `shuffle_buffer` positions drawn at random — computed up front, so a position
  in it is the whole state: `state_dict()` is a few integers and `load_state_dict` continues
  with exactly the samples not yet yielded, in the same order.

DataLoader workers: `ds.loader(batch_size=..., num_workers=N)` (a `torch.utils.data.DataLoader`)
deals the order out in batches, batch k to worker k mod N, which is the order in which the
DataLoader hands batches back, so the batches arrive in exactly the order of a single
process; it counts the batches that reached the training loop, so `state_dict()` is exact
with workers (it also lists each worker's position), and a resume may use another number
of workers or batch size. A plain `DataLoader(ds, num_workers=N)` also yields every sample
once, but this process cannot see the workers' positions: `state_dict()` then refuses, and
so does resuming a saved position into more than one plain worker.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import random
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import lance
import torch
from PIL import Image
from torch.utils.data import IterableDataset, get_worker_info

from episodelake.lake import Lake
from episodelake.lake.export.formats import checked
from episodelake.lake.export.samples import Sample, samples
from episodelake.lake.export.selection import EpisodeSteps, select
from episodelake.lake.export.spec import ExportSpec
from episodelake.lake.export.split import Dedup, split_of
from episodelake.lake.ops import lineage as lineage_mod
from episodelake.lake.storage import tables
from episodelake.lake.storage.errors import InvalidInput, NotFound
from episodelake.trainer.data_loader import LakeLoader
from episodelake.trainer.data_read import (
    BLOCK,
    BlobReader,
    ImageCache,
    decode_rgb,
    prefetched,
    rgb_array,
)

log = logging.getLogger(__name__)

Granularity = Literal["step", "episode"]
#: Episodes whose built samples are kept in memory while the buffer draws from them.
EPISODE_CACHE = 256


@dataclass(frozen=True)
class PlannedEpisode:
    """A selected episode and which of its samples (by position in `samples(...)`) are kept."""

    episode: EpisodeSteps
    kept: tuple[int, ...]


@dataclass(frozen=True)
class Plan:
    """Everything every rank agrees on: the selection, the kept samples, the versions read."""

    spec: ExportSpec
    episodes: list[PlannedEpisode]
    steps: lance.LanceDataset
    episodes_dataset: lance.LanceDataset
    versions: dict[str, int]
    tag: str | None
    recorded: dict
    skipped: dict[str, int]

    @property
    def samples(self) -> int:
        return sum(len(e.kept) for e in self.episodes)


class _AtVersions(Lake):
    """A read-only view of the lake with each table at a given version."""

    def __init__(self, lake: Lake, versions: dict[str, int]):
        super().__init__(lake.location, tag=f"@steps-v{versions['steps']}", create=False)
        self._versions = versions

    def _at_tag(self, table: str) -> lance.LanceDataset:
        return tables.open_table(self.path, table, version=self._versions[table])


def _view(lake: Lake, version: str | int | None) -> tuple[Lake, str | None]:
    """(the lake view to read, the tag read). An int is a version of the `steps` table; the
    other tables are read at their newest version committed no later than it (writers commit
    episodes before their steps, so every step read has its episode)."""
    if version is None:
        return lake, None
    if isinstance(version, bool) or not isinstance(version, int | str):
        raise InvalidInput(f"version: a tag name or a steps table version (int), not {version!r}")
    if isinstance(version, str):
        if version not in lake.tags():
            raise NotFound(f"version: no tag {version!r}; `elake tag --list` shows the tags")
        return lake.at(version), version
    steps: dict[int, Any] = {v["version"]: v["timestamp"] for v in lake.dataset("steps").versions()}
    if version not in steps:
        raise NotFound(f"version: the steps table has no version {version} (it has "
                       f"{min(steps)}..{max(steps)}; older ones may have been pruned)")
    at = steps[version]
    versions = {"steps": version}
    for table in lake.datasets():
        if table == "steps":
            continue
        earlier = [v["version"] for v in lake.dataset(table).versions() if v["timestamp"] <= at]
        versions[table] = max(earlier) if earlier else 1
    return _AtVersions(lake, versions), None


def plan(lake: Lake, spec: ExportSpec, *, version: str | int | None = None,
         split: str | None = None) -> Plan:
    """Resolve the selection and keep the samples an export of `spec` would write (`split`:
    only that split's tasks, as the export splits them)."""
    view, tag = _view(lake, version)
    if tag is not None and spec.tag is None:
        spec = spec.model_copy(update={"tag": tag})
        view = lake
    selection = select(view, spec)
    dedup = Dedup(spec.dedup)
    skipped: Counter = Counter()
    planned = []
    for episode in selection.episodes:
        built = list(samples(episode, spec, skipped))
        in_split = split is None or split_of(episode.task_name, spec.seed, spec.val_fraction) == split
        kept = []
        for index, sample in enumerate(built):
            if dedup.seen(sample.key):
                skipped["duplicate"] += 1
            elif in_split:
                kept.append(index)
        if kept:
            planned.append(PlannedEpisode(episode, tuple(kept)))
    if not planned:
        reasons = ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in sorted(skipped.items()))
        which = f" in split {split!r}" if split else ""
        raise NotFound(f"selection: {len(selection.episodes)} episode(s) matched but no sample "
                       f"was kept{which} ({reasons or 'none'}); widen where/set, or pass include_failed")
    source = selection.source
    return Plan(spec, planned, source.dataset("steps"), source.dataset("episodes"),
                selection.versions, spec.tag, selection.recorded(), dict(sorted(skipped.items())))


def split_of_episode(episode_id: str, world_size: int) -> int:
    """The rank (of `world_size`) that reads `episode_id`: a hash of the id alone, so an
    episode keeps its rank as the lake grows."""
    return int.from_bytes(hashlib.sha256(episode_id.encode("utf-8")).digest()[:8], "big") % world_size


def rank_order(plan_: Plan, rank: int, world_size: int, seed: int) -> list[str]:
    """This rank's episodes, in the order it reads them: the selected episodes shuffled with
    `seed`, those whose hash split is `rank`."""
    ids = sorted(e.episode.episode_id for e in plan_.episodes)
    if len(set(ids)) != len(ids):
        raise InvalidInput("the episodes table holds an episode twice; run `elake optimize`")
    random.Random(f"episodes:{seed}").shuffle(ids)
    return [eid for eid in ids if split_of_episode(eid, world_size) == rank]


def sample_order(count: int, shuffle_buffer: int, rng: random.Random) -> list[int]:
    """Positions 0..count-1 in the order a buffer of `shuffle_buffer` of them, refilled in
    reading order and drawn from at random, yields them (1: reading order)."""
    buffer = list(range(min(shuffle_buffer, count)))
    position = len(buffer)
    out = []
    while buffer:
        pick = rng.randrange(len(buffer))
        out.append(buffer[pick])
        if position < count:
            buffer[pick] = position
            position += 1
        else:
            buffer[pick] = buffer[-1]
            buffer.pop()
    return out


def worker_share(start: int, count: int, chunk: int, worker: int, workers: int) -> list[int]:
    """The order's positions from `start` that DataLoader worker `worker` of `workers` reads:
    chunks of `chunk` (the batch size) dealt in turn, chunk k to worker k mod `workers`, the
    order in which a DataLoader hands back its workers' batches."""
    return [p for p in range(start, count) if ((p - start) // chunk) % workers == worker]


def _pil(data: bytes) -> Image.Image:
    """Opened, not decoded: PIL reads the pixels on first use."""
    return Image.open(io.BytesIO(data))


def _plain_parts(messages: list[dict]) -> list[dict]:
    """The sample's messages with each image part as ``{"type": "image"}`` (what chat
    templates and TRL read; the images go alongside, in order)."""
    return [{"role": m["role"], "content": m["content"] if isinstance(m["content"], str) else
             [{"type": "image"} if p["type"] == "image" else p for p in m["content"]]}
            for m in messages]


def _one(text: Any) -> str:
    return text[0] if isinstance(text, list) else text


def processed(processor: Any, sample: Sample, images: list[Image.Image]) -> dict[str, torch.Tensor]:
    """`processor`'s tensors for the sample (batch dimension removed), with `labels` -100
    everywhere but the last assistant turn."""
    messages = _plain_parts(sample.messages)
    where = f"episode {sample.episode_id} step {sample.step}"
    try:
        full = _one(processor.apply_chat_template(messages, tokenize=False))
        prompt = _one(processor.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True))
        pictures = [image if image.mode == "RGB" else image.convert("RGB") for image in images]
        encoded = processor(text=[full], images=pictures or None, return_tensors="pt")
        tokenizer = getattr(processor, "tokenizer", processor)
        answer = tokenizer(full[len(prompt):], add_special_tokens=False)["input_ids"]
    except Exception as exc:  # the processor's own error, whatever its type: name the argument
        raise InvalidInput(f"processor: {type(processor).__name__} refused the sample of {where} "
                           f"({type(exc).__name__}: {exc})") from exc
    if not full.startswith(prompt):
        raise InvalidInput(f"processor: its chat template does not end the prompt where the "
                           f"answer starts ({where}); give a processor whose template supports "
                           "add_generation_prompt")
    length = encoded["input_ids"].shape[-1]
    # per-token tensors (input_ids, attention_mask, mm_token_type_ids...) lose the batch axis
    out = {key: value[0] if value.dim() == 2 and value.shape == (1, length) else value
           for key, value in encoded.items() if isinstance(value, torch.Tensor)}
    labels = out["input_ids"].clone()
    labels[: max(0, labels.numel() - len(answer))] = -100
    out["labels"] = labels
    return out


#: The layout of `state_dict()`; a state of another layout is refused by `load_state_dict`.
STATE_FORMAT = 2
ImageMode = Literal["pil", "rgb"]


class LakeSftDataset(IterableDataset):
    """One rank's SFT samples (see the module docstring); build it with `sft_dataset`."""

    def __init__(self, plan_: Plan, order: list[str], *, rank: int, world_size: int, seed: int,
                 shuffle_buffer: int, processor: Any = None, images: ImageMode = "pil",
                 prefetch: int = 16, image_cache: int = 16, decode_threads: int = 2):
        by_id = {e.episode.episode_id: e for e in plan_.episodes}
        self.plan = plan_
        self.episodes = [by_id[i] for i in order]
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.shuffle_buffer = max(1, shuffle_buffer)
        self.processor = processor
        self.images = images
        self.prefetch, self.image_cache, self.decode_threads = prefetch, image_cache, decode_threads
        self.epoch = 0
        #: (episode position, kept position) of every sample of this rank, in reading order
        self.refs = [(e, k) for e, planned in enumerate(self.episodes) for k in range(len(planned.kept))]
        self._built: OrderedDict[int, list[Sample]] = OrderedDict()
        self._order_of: tuple[int, list[int]] | None = None
        #: where the training loop stands: samples of `epoch`'s order it has received
        self._position: dict[str, Any] = {"epoch": 0, "yielded": 0, "workers": None}
        self._resume: dict[str, Any] | None = None
        #: set by `ds.loader(...)` while it starts a pass: where the pass starts, its batch size
        self._pass: dict[str, int] | None = None
        #: shared with DataLoader workers: [0] a plain DataLoader's worker iterated (positions
        #: this process cannot see), [1] one continued from the loaded state (it is used up)
        self._unseen = torch.zeros(2, dtype=torch.int64).share_memory_()
        self.reader: BlobReader | None = None  # made in the process that reads (a worker makes its own)

    def __len__(self) -> int:
        return len(self.refs)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["reader"] = None  # threads and caches stay with their process
        state["_built"] = OrderedDict()
        return state

    def collate(self, batch: list[dict[str, Any]]) -> dict[str, Any]:
        """A DataLoader `collate_fn` for processed samples: per-token tensors right-padded
        (labels with -100, attention with 0, the rest with the pad token) and stacked; image
        tensors concatenated, as Qwen2-VL-style models take them. Without a processor, the
        list of samples as it is (PIL images do not stack)."""
        if self.processor is None:
            return {"samples": batch}
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        pad = getattr(tokenizer, "pad_token_id", None) or 0
        width = max(len(item["input_ids"]) for item in batch)
        out: dict[str, Any] = {}
        for key in batch[0]:
            values = [item[key] for item in batch]
            if all(v.dim() == 1 and len(v) == len(item["input_ids"]) for v, item in zip(values, batch, strict=True)):
                fill = -100 if key == "labels" else 0 if key == "attention_mask" else pad
                out[key] = torch.stack([torch.nn.functional.pad(v, (0, width - len(v)), value=fill) for v in values])
            else:
                out[key] = torch.cat(values)
        return out

    def loader(self, batch_size: int | None = 1, num_workers: int = 0, **kwargs: Any):
        """A `torch.utils.data.DataLoader` over this dataset whose workers keep the order of a
        single process and whose batches are counted, so `state_dict()` is exact with
        workers (`episodelake.trainer.data_loader.LakeLoader`). `collate_fn` defaults to
        `collate`; other DataLoader arguments pass through."""
        return LakeLoader(self, batch_size=batch_size, num_workers=num_workers, **kwargs)

    def set_epoch(self, epoch: int) -> None:
        """Another shuffle for the next pass (the episodes' ranks stay)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise InvalidInput(f"epoch: a whole number from 0, not {epoch!r}")
        self.epoch = epoch

    # -- resuming ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Where the training loop stands: after `load_state_dict`, a new pass yields exactly
        the samples not yet yielded, in the same order. JSON-serialisable. With DataLoader
        workers, iterate through `loader(...)`; the positions of a plain DataLoader's workers
        are not visible here, and saving them is refused."""
        if int(self._unseen[0]):
            raise InvalidInput(
                "num_workers: this dataset was iterated by the workers of a plain DataLoader, whose "
                "positions this process cannot see, so no exact state can be saved; iterate it with "
                "`ds.loader(batch_size=..., num_workers=N)` (it counts what reached the training loop) "
                "or with num_workers=0")
        position = self._position
        return {"format": STATE_FORMAT, "epoch": position["epoch"], "yielded": position["yielded"],
                "workers": position["workers"], **self._identity()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from `state` (a `state_dict()` of a dataset of the same selection, lake
        version, rank, world size, seed and shuffle buffer): the next pass starts after the
        samples it counts. Anything else is refused, naming the argument that differs."""
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            found = state.get("format") if isinstance(state, Mapping) else type(state).__name__
            raise InvalidInput(f"state: not a saved position of this sft_dataset (format {STATE_FORMAT}, "
                               f"got {found!r}); save it with ds.state_dict()")
        mine = self._identity()
        for name in ("seed", "rank", "world_size", "shuffle_buffer"):
            if state.get(name) != mine[name]:
                raise InvalidInput(f"{name}: the state was saved by a dataset with {name}={state.get(name)!r}, "
                                   f"this one has {name}={mine[name]!r}; build the dataset with "
                                   f"{name}={state.get(name)!r} to resume")
        if state.get("plan") != mine["plan"]:
            raise InvalidInput("state: it was saved by a dataset of another selection or lake version "
                               "(where, set, version, split or sample options differ); resume with the "
                               "same arguments, at the same tag or version")
        yielded, epoch = state.get("yielded"), state.get("epoch")
        if not (isinstance(yielded, int) and isinstance(epoch, int) and 0 <= yielded <= len(self) and epoch >= 0):
            raise InvalidInput(f"state: its position ({epoch!r}, {yielded!r}) is not one of this dataset "
                               f"(epoch >= 0, 0..{len(self)} samples)")
        self.epoch = epoch
        self._position = {"epoch": epoch, "yielded": yielded, "workers": state.get("workers")}
        self._resume = {"epoch": epoch, "yielded": yielded}
        self._unseen.zero_()  # the position is the loaded one

    def _identity(self) -> dict[str, Any]:
        digest = hashlib.sha256(json.dumps([self.plan.versions, self.plan.recorded, len(self.refs)],
                                           sort_keys=True, default=str).encode()).hexdigest()[:16]
        return {"rank": self.rank, "world_size": self.world_size, "seed": self.seed,
                "shuffle_buffer": self.shuffle_buffer, "plan": digest}

    def _start(self) -> int:
        """Where the next pass of `self.epoch` starts: a loaded state's position once, else 0."""
        resume, self._resume = self._resume, None
        if resume is None or int(self._unseen[1]):
            return 0  # none, or a plain DataLoader's worker already continued from it
        if resume["epoch"] != self.epoch:
            raise InvalidInput(f"epoch: the loaded state is in epoch {resume['epoch']} and this pass is "
                               f"epoch {self.epoch}; call ds.set_epoch({resume['epoch']}) before the "
                               "resumed pass (load_state_dict sets it)")
        return resume["yielded"]

    def order(self, epoch: int | None = None) -> list[int]:
        """The pass's order: positions in `refs` (the same for a seed, epoch and rank)."""
        epoch = self.epoch if epoch is None else epoch
        if self._order_of is None or self._order_of[0] != epoch:
            rng = random.Random(f"{self.seed}:{epoch}:{self.rank}")
            self._order_of = (epoch, sample_order(len(self.refs), self.shuffle_buffer, rng))
        return self._order_of[1]

    # -- iterating --------------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, Any]]:
        worker = get_worker_info()
        wid, workers = (0, 1) if worker is None else (worker.id, worker.num_workers)
        run = self._pass
        if run is not None:  # a pass of `loader(...)`: it says where to start and counts
            start, chunk = run["start"], run["chunk"]
        else:
            start, chunk = self._start(), 1
            if start and workers > 1:  # every worker refuses, before any marks the state used
                raise InvalidInput(
                    f"num_workers: a resumed position cannot be kept by {workers} workers of a plain "
                    "DataLoader (they would interleave the rest in another order); iterate with "
                    "`ds.loader(batch_size=..., num_workers=N)` or num_workers=0")
            if worker is not None:
                self._unseen[0] = 1
                if start:
                    self._unseen[1] = 1
        order = self.order()
        share = [order[p] for p in worker_share(start, len(order), chunk, wid, workers)]
        counting = run is None and worker is None  # this process is the training loop's
        if counting:
            self._unseen[0] = 0  # this pass's position is known again
            self._position = {"epoch": self.epoch, "yielded": start, "workers": None}
        return self._emit(share, start if counting else None)

    def _emit(self, share: list[int], counted_from: int | None) -> Iterator[dict[str, Any]]:
        if self.reader is None or self.reader.pid != os.getpid():
            decode = None if self.processor is None and self.images == "pil" else \
                rgb_array if self.processor is None else decode_rgb
            cache = ImageCache(max(self.image_cache, 1) if decode is not None else 256)
            self.reader = BlobReader(self.plan.steps, cache, decode, self.decode_threads)
        blocks = (share[i:i + BLOCK] for i in range(0, len(share), BLOCK))
        # a DataLoader worker is itself a prefetcher (prefetch_factor batches): it reads on
        # its own thread, and starts no thread of its own in a process that may be a fork
        ahead = 0 if get_worker_info() is not None else self.prefetch
        for n, item in enumerate(prefetched(blocks, self._build, ahead), 1):
            if counted_from is not None:
                self._position = {"epoch": self.epoch, "yielded": counted_from + n, "workers": None}
            yield item

    def _build(self, block: list[int]) -> list[dict[str, Any]]:
        """The block's samples (positions in `refs`), their screenshots read together."""
        built = []
        wanted: dict[str, tuple[int, str]] = {}
        for index in block:
            position, kept = self.refs[index]
            sample = self._samples_of(position)[kept]
            episode = self.episodes[position].episode
            rowid = {row["image_sha256"]: rid for rid, row in zip(episode.rowids, episode.steps, strict=True)}
            shas = [sha for sha in sample.images if sha is not None]
            for sha in shas:
                wanted.setdefault(sha, (rowid[sha], f"episode {episode.episode_id}"))
            built.append((sample, shas))
        assert self.reader is not None
        values = self.reader.read(wanted)
        return [self._item(sample, [values[sha] for sha in shas]) for sample, shas in built]

    def _item(self, sample: Sample, images: list[Any]) -> dict[str, Any]:
        if self.processor is not None:
            return processed(self.processor, sample, images)
        shown = [_pil(data) for data in images] if self.images == "pil" else images
        return {"messages": _plain_parts(sample.messages), "images": shown,
                "image_sha256": [sha for sha in sample.images if sha is not None],
                "episode_id": sample.episode_id, "step": sample.step, "task": sample.task,
                "key": sample.key}

    def _samples_of(self, position: int) -> list[Sample]:
        built = self._built.get(position)
        if built is None:
            planned = self.episodes[position]
            every = list(samples(planned.episode, self.plan.spec, Counter()))
            built = [every[k] for k in planned.kept]
            self._built[position] = built
            if len(self._built) > EPISODE_CACHE:
                self._built.popitem(last=False)
        else:
            self._built.move_to_end(position)
        return built


def sft_dataset(lake: Lake | str | Path, *, where: str | None = None, set: str | None = None,
                granularity: Granularity = "step", history_images: int = 3,
                history_length: int | None = None, version: str | int | None = None,
                rank: int = 0, world_size: int = 1, seed: int = 0, shuffle_buffer: int = 1000,
                processor: Any = None, include_failed: bool = False,
                good_steps_only: bool = False, include_invalid: bool = False,
                style: str = "mai-ui", max_images: int | None = None, dedup: bool = True,
                split: str | None = None, val_fraction: float = 0.1, split_seed: int = 0,
                lineage: str | None = None, images: ImageMode = "pil", prefetch: int = 16,
                image_cache: int = 16, decode_threads: int = 2,
                on_plan: Callable[[Plan], None] | None = None) -> LakeSftDataset:
    """This rank's SFT samples of the lake, built as the exports build them.

    Selection: `set` (a curation set's name or id; its pinned tag is read unless `version`
    says otherwise), `where` (a SQL condition over `episodes JOIN steps`, as `elake export
    sft --where` takes), the success filter (`include_failed`), `good_steps_only`,
    `include_invalid`. `version`: a tag, or a version of the `steps` table (int). Samples:
    `granularity`, `history_images`, `history_length`, `style`, `max_images`, `dedup` as the
    export's options of the same names. `split` ("train" or "val"): only that split's tasks,
    split by `split_seed` and `val_fraction` exactly as an export with `seed=split_seed`
    splits them (default: every task). Sharding and order: `rank` of `world_size`, `seed`
    (order of episodes, shuffle buffer of `shuffle_buffer` samples; 1 reads in order).
    `lineage`: a name for this dataset; when given, rank 0 records in `lineage` what the
    whole dataset reads, every rank's episodes (the lake must be writable; `elake lineage
    NAME` prints it). Reading (`trainer/data_read.py`): `images` ("pil": lazily opened PIL
    images; "rgb": decoded read-only uint8 arrays; with a processor the dataset decodes them
    for it), `prefetch` (samples built ahead on a thread; 0: none), `image_cache` (decoded
    screenshots kept by sha256, for the samples that show them again), `decode_threads`.
    """
    if isinstance(lake, str | Path):
        lake = Lake(lake, create=False)
    for name, value in (("rank", rank), ("world_size", world_size), ("seed", seed),
                        ("shuffle_buffer", shuffle_buffer), ("prefetch", prefetch), ("image_cache", image_cache),
                        ("decode_threads", decode_threads)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(f"{name}: must be an integer, not {value!r}")
    for name, value, least in (("prefetch", prefetch, 0), ("image_cache", image_cache, 1),
                               ("decode_threads", decode_threads, 1)):
        if value < least:
            raise InvalidInput(f"{name}: must be at least {least}, not {value}")
    if images not in ("pil", "rgb"):
        raise InvalidInput(f"images: 'pil' (lazily opened PIL images) or 'rgb' (decoded arrays), not {images!r}")
    if world_size < 1:
        raise InvalidInput(f"world_size: must be at least 1, not {world_size}")
    if not 0 <= rank < world_size:
        raise InvalidInput(f"rank: must be in 0..{world_size - 1} for world_size {world_size}, not {rank}")
    if split not in (None, "train", "val"):
        raise InvalidInput(f"split: 'train', 'val' or None (every task), not {split!r}")
    if processor is not None and not (hasattr(processor, "apply_chat_template") and callable(processor)):
        raise InvalidInput("processor: give a Hugging Face processor (apply_chat_template and "
                           f"__call__(text=, images=)), not a {type(processor).__name__}")
    options: dict[str, Any] = {"where": where, "set": set, "granularity": granularity, "history_images": history_images,
               "history_length": history_length, "include_failed": include_failed,
               "good_steps_only": good_steps_only, "include_invalid": include_invalid, "style": style,
               "max_images": max_images, "dedup": dedup, "val_fraction": val_fraction, "seed": split_seed}
    try:
        spec = checked(ExportSpec(format="llamafactory", out=Path("unused"), **options))
    except InvalidInput:
        raise
    except ValueError as exc:  # pydantic's ValidationError names the field
        raise InvalidInput(" ".join(str(exc).split())) from None
    plan_ = plan(lake, spec, version=version, split=split)
    if on_plan is not None:
        on_plan(plan_)
    order = rank_order(plan_, rank, world_size, seed)
    dataset = LakeSftDataset(plan_, order, rank=rank, world_size=world_size, seed=seed,
                             shuffle_buffer=shuffle_buffer, processor=processor, images=images,
                             prefetch=prefetch, image_cache=image_cache, decode_threads=decode_threads)
    if not dataset.refs:
        log.warning("rank %s of %s: no sample (%s episodes for %s ranks)", rank, world_size,
                    len(plan_.episodes), world_size)
    if lineage is not None and rank == 0:  # one row for the dataset, not one per rank
        record_lineage(lake, plan_, lineage, options={**options, "version": version, "split": split,
                                                      "seed": seed, "world_size": world_size})
    return dataset


def record_lineage(lake: Lake, plan_: Plan, output: str, *, options: dict,
                   run_id: str | None = None, kind: str = "dataset") -> dict:
    """One `lineage` row for what `plan_` reads (every rank's episodes: the dataset as a whole)."""
    steps = sum(len(e.episode.steps) for e in plan_.episodes)
    return lineage_mod.record(
        lake, kind, output, run_id=run_id, tag=plan_.tag, lake_versions=plan_.versions,
        selection={**plan_.recorded, "options": options},
        counts={"episodes": len(plan_.episodes), "steps": steps, "samples": plan_.samples,
                "skipped": plan_.skipped},
        episode_ids=[e.episode.episode_id for e in plan_.episodes])
