"""Train straight from the lake: `sft_dataset`, a PyTorch `IterableDataset` of SFT samples.

```python
from torch.utils.data import DataLoader
from episodelake.lake import Lake
from episodelake.trainer.data import sft_dataset

ds = sft_dataset(Lake("elake-data"), set="good-runs", history_images=2, version="v1",
                 rank=rank, world_size=world_size, seed=0)
for sample in DataLoader(ds, batch_size=None):   # one sample at a time (images are PIL)
    sample["messages"], sample["images"]
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

What Lance and LanceDB do here, and what they do not:
- the ranks' shares: a LanceDB permutation (`lancedb.permutation.permutation_builder`) over
  the `episodes` table at the version read, filtered to the selected episodes, split by a
  hash of `episode_id` into `world_size` splits and shuffled with `seed`. Splits are
  disjoint and cover every episode, and stay the same for a seed and lake version (an
  episode keeps its rank as the lake grows, since the split is a hash of its id). Hash
  splits are not exactly even: ranks get different numbers of samples (a DDP loop should
  stop all ranks at the smallest `len(ds)`, or pad).
  Not LanceDB's `StreamingDataset` nor `split_random(fixed=N)`: both drop the rows past a
  multiple of the split count, so some episodes would never be read. The permutation's
  plain `iter()` also drops a last partial batch; it is read with `skip_last_batch=False`.
- screenshots: `LanceDataset.take_blobs` on the steps version read, only for the samples
  emitted, never a table scan. Not `lance.torch.data.LanceDataset`: it shards by fragment or
  batch of rows, and a sample needs its whole episode (history), so shards must be episodes.
- shuffling and resuming: a buffer of sample positions (not of decoded samples) in this
  module, so `state_dict()` is a few integers and the random state, and `load_state_dict`
  continues with exactly the samples not yet yielded.

DataLoader workers split the rank's episodes among them (each worker its own buffer);
`state_dict` describes the iteration in this process, so resume with `num_workers=0`.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
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
from episodelake.lake.core import lineage as lineage_mod
from episodelake.lake.core import tables
from episodelake.lake.core.errors import InvalidInput, NotFound
from episodelake.lake.core.sql import sql_in
from episodelake.lake.export.formats import checked
from episodelake.lake.export.samples import Sample, samples
from episodelake.lake.export.selection import EpisodeSteps, select
from episodelake.lake.export.spec import ExportSpec
from episodelake.lake.export.split import Dedup, split_of

log = logging.getLogger(__name__)

Granularity = Literal["step", "episode"]
#: Episodes whose built samples are kept in memory while the buffer draws from them.
EPISODE_CACHE = 256
#: Episodes per permutation read.
_READ_BATCH = 1024


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


def _open_table(lake: Lake, dataset: lance.LanceDataset):
    """The LanceDB table over the same Lance dataset, at the same version."""
    import lancedb

    loc = lake.location
    db = lancedb.connect(str(loc.local) if loc.is_local else loc.uri,
                         storage_options=None if loc.is_local else loc.storage_options)
    table = db.open_table("episodes")
    table.checkout(dataset.version)
    return table


def rank_order(lake: Lake, plan_: Plan, rank: int, world_size: int, seed: int) -> list[str]:
    """This rank's episodes, in the order it reads them (see the module docstring)."""
    from lancedb.permutation import Permutation, permutation_builder

    ids = [e.episode.episode_id for e in plan_.episodes]
    table = _open_table(lake, plan_.episodes_dataset)
    permutation = (permutation_builder(table).filter(sql_in("episode_id", ids))
                   .split_hash(["episode_id"], [1] * world_size, discard_weight=0)
                   .shuffle(seed=seed).execute())
    splits = permutation.to_arrow().column("split_id").to_pylist()
    if rank not in splits:  # LanceDB refuses to read an empty split
        return []
    reader = Permutation.from_tables(table, permutation, rank).select_columns(["episode_id"])
    order: list[str] = []
    for batch in reader.iter(_READ_BATCH, skip_last_batch=False):
        rows: list[dict[str, Any]] = batch  # type: ignore[assignment]  # typed as one row; a batch is a list of them
        order += [row["episode_id"] for row in rows]
    if len(set(order)) != len(order):
        raise InvalidInput("the episodes table holds an episode twice; run `elake optimize`")
    return order


class LazyImages:
    """Reads a planned episode's screenshots from the blob column, by sha256, on demand."""

    def __init__(self, steps: lance.LanceDataset):
        self.steps = steps

    def read(self, episode: EpisodeSteps, shas: list[str]) -> list[bytes]:
        rowid: dict[str, int] = {}
        for rid, row in zip(episode.rowids, episode.steps, strict=True):
            rowid.setdefault(row["image_sha256"], rid)
        ids = [rowid[sha] for sha in shas]
        out = []
        for sha, blob in zip(shas, self.steps.take_blobs("image", ids=ids), strict=True):
            if blob is None:
                raise NotFound(f"episode {episode.episode_id}: screenshot {sha} has no bytes in the lake")
            with blob:
                out.append(blob.read())
        return out


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
        pictures = [image.convert("RGB") for image in images]
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


class LakeSftDataset(IterableDataset):
    """One rank's SFT samples (see the module docstring); build it with `sft_dataset`."""

    def __init__(self, plan_: Plan, order: list[str], *, rank: int, world_size: int, seed: int,
                 shuffle_buffer: int, processor: Any = None):
        by_id = {e.episode.episode_id: e for e in plan_.episodes}
        self.plan = plan_
        self.episodes = [by_id[i] for i in order]
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.shuffle_buffer = max(1, shuffle_buffer)
        self.processor = processor
        self.epoch = 0
        #: (episode position, kept position) of every sample of this rank, in reading order
        self.refs = [(e, k) for e, planned in enumerate(self.episodes) for k in range(len(planned.kept))]
        self._images = LazyImages(plan_.steps)
        self._built: OrderedDict[int, list[Sample]] = OrderedDict()
        self._state: dict[str, Any] | None = None
        self._resume: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.refs)

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

    def set_epoch(self, epoch: int) -> None:
        """Another shuffle of the buffer for the next pass (the episodes' ranks stay)."""
        self.epoch = epoch

    # -- resuming ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Where the iteration stands: after `load_state_dict`, a new iteration yields exactly
        the samples not yet yielded, in the same order. JSON-serialisable."""
        if self._state is None:
            return {"epoch": self.epoch, "position": 0, "buffer": [], "rng": None, "yielded": 0,
                    **self._identity()}
        state = self._state
        return {**state, "buffer": list(state["buffer"]), "rng": _rng_json(state["rng"].getstate())}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if {k: state.get(k) for k in self._identity()} != self._identity():
            raise InvalidInput("state: it was saved by a dataset of another selection, rank, seed "
                               "or lake version; resume with the same arguments")
        self.epoch = state["epoch"]
        self._resume = dict(state)

    def _identity(self) -> dict[str, Any]:
        digest = hashlib.sha256(json.dumps([self.plan.versions, self.plan.recorded, len(self.refs)],
                                           sort_keys=True, default=str).encode()).hexdigest()[:16]
        return {"rank": self.rank, "world_size": self.world_size, "seed": self.seed, "plan": digest}

    # -- iterating --------------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, Any]]:
        refs = self.refs
        worker = get_worker_info()
        rng = random.Random(f"{self.seed}:{self.epoch}:{self.rank}")
        if worker is not None and worker.num_workers > 1:
            refs = [r for r in refs if r[0] % worker.num_workers == worker.id]
            rng = random.Random(f"{self.seed}:{self.epoch}:{self.rank}:{worker.id}")
        state: dict[str, Any] = {"epoch": self.epoch, "position": 0, "buffer": [], "rng": rng,
                                 "yielded": 0, **self._identity()}
        if self._resume is not None:
            resume, self._resume = self._resume, None
            state.update(position=resume["position"], buffer=list(resume["buffer"]),
                         yielded=resume["yielded"])
            if resume["rng"] is not None:
                rng.setstate(_rng_state(resume["rng"]))
        self._state = state
        buffer: list[int] = state["buffer"]
        while True:
            if state["position"] < len(refs) and len(buffer) < self.shuffle_buffer:
                buffer.append(state["position"])
                state["position"] += 1
                continue
            if not buffer:
                return
            pick = rng.randrange(len(buffer))
            index = buffer[pick]
            buffer[pick] = buffer[-1]
            buffer.pop()
            state["yielded"] += 1
            yield self._sample(*refs[index])

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

    def _sample(self, position: int, kept: int) -> dict[str, Any]:
        sample = self._samples_of(position)[kept]
        episode = self.episodes[position].episode
        shas = [sha for sha in sample.images if sha is not None]
        images = [_pil(data) for data in self._images.read(episode, shas)]
        if self.processor is not None:
            return processed(self.processor, sample, images)
        return {"messages": _plain_parts(sample.messages), "images": images, "image_sha256": shas,
                "episode_id": sample.episode_id, "step": sample.step, "task": sample.task,
                "key": sample.key}


def _rng_json(state: tuple) -> list:
    return [state[0], list(state[1]), state[2]]


def _rng_state(value: list) -> tuple:
    return (value[0], tuple(value[1]), value[2])


def sft_dataset(lake: Lake | str | Path, *, where: str | None = None, set: str | None = None,
                granularity: Granularity = "step", history_images: int = 3,
                history_length: int | None = None, version: str | int | None = None,
                rank: int = 0, world_size: int = 1, seed: int = 0, shuffle_buffer: int = 1000,
                processor: Any = None, include_failed: bool = False,
                good_steps_only: bool = False, include_invalid: bool = False,
                style: str = "mai-ui", max_images: int | None = None, dedup: bool = True,
                split: str | None = None, val_fraction: float = 0.1, split_seed: int = 0,
                lineage: str | None = None,
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
    NAME` prints it).
    """
    if isinstance(lake, str | Path):
        lake = Lake(lake, create=False)
    for name, value in (("rank", rank), ("world_size", world_size), ("seed", seed),
                        ("shuffle_buffer", shuffle_buffer)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(f"{name}: must be an integer, not {value!r}")
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
    order = rank_order(lake, plan_, rank, world_size, seed)
    dataset = LakeSftDataset(plan_, order, rank=rank, world_size=world_size, seed=seed,
                             shuffle_buffer=shuffle_buffer, processor=processor)
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
