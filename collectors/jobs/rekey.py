"""Re-keying stored steps' anchor keys (`elake rekey`), e.g. after changing the clustering
threshold, or for steps recorded without keys (``image_checks="structure"``, imports).

Keys are computed per group the way the recorder's keyer does (`lake.derive.anchor`):
a step with an accessibility-tree hash is keyed by it; any other step by its perceptual
hash, clustered within its group by :func:`group_anchor_keys` (order-independent, so the
result does not depend on which worker read which step). With `embedding_threshold`, a step
without a tree is keyed by its stored screen embedding instead (`elake enrich --what embed`),
clustered by :func:`embedding_anchor_keys`: the mode for devices with no UI tree, exact on
lossless captures where the perceptual hash merges distinct screens. The costly part, decoding
screenshots that have no perceptual hash yet, runs per fragment of the steps table, in
this process or as Ray tasks (`bulk.run_parts`); the new keys and hashes are written with one
``merge_insert`` (`update_columns`). Steps of episodes without a group id are left alone:
their keys group nothing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from episodelake.collectors.jobs.bulk import RayOptions, run_parts
from episodelake.lake.curation.similar import stored_embeddings
from episodelake.lake.derive.anchor import DEFAULT_THRESHOLD, group_anchor_keys, phash64
from episodelake.lake.derive.embedding import embedding_anchor_keys
from episodelake.lake.export.selection import select_episodes
from episodelake.lake.ops.updates import update_columns
from episodelake.lake.storage.errors import InvalidInput, LakeCorrupt, LakeError
from episodelake.lake.storage.lake import Lake

_COLUMNS = ["episode_id", "step", "image_sha256", "image_phash", "ui_tree_hash", "anchor_key"]


@dataclass
class RekeyReport:
    groups: int = 0
    steps: int = 0
    hashed: int = 0
    changed: int = 0

    def summary(self) -> str:
        return (f"{self.steps} step(s) in {self.groups} group(s): {self.hashed} perceptual "
                f"hash(es) computed, {self.changed} key(s) changed")


def fragment_hashes(fragment_id: int, steps: lance.LanceDataset, episode_ids: list[str]) -> pa.Table:
    """The steps of `episode_ids` in one fragment, with a perceptual hash for every step that
    has a screenshot (computed from it where none is stored; `hashed` says which)."""
    fragment = steps.get_fragment(fragment_id)
    if fragment is None:
        raise LakeError(f"steps fragment {fragment_id} is gone (the table was compacted meanwhile); "
                        "run the rekey again")
    table = fragment.to_table(columns=_COLUMNS, with_row_id=True)
    table = table.filter(pc.is_in(table["episode_id"], value_set=pa.array(episode_ids, pa.string())))
    hashes = table["image_phash"].to_pylist()
    missing = [i for i, (value, sha) in enumerate(zip(hashes, table["image_sha256"].to_pylist(),
                                                      strict=True))
               if value is None and sha is not None]
    if missing:
        rowids = table["_rowid"].take(missing).to_pylist()
        for index, blob in zip(missing, steps.take_blobs("image", ids=rowids), strict=True):
            if blob is None:
                raise LakeCorrupt(f"episode {table['episode_id'][index]} step {table['step'][index]}: "
                                  "the row names a screenshot but holds no image bytes")
            with blob:
                hashes[index] = phash64(blob.read())
    hashed = [False] * table.num_rows
    for index in missing:
        hashed[index] = True
    table = table.set_column(table.schema.get_field_index("image_phash"), "image_phash",
                             pa.array(hashes, pa.int64()))
    return table.append_column("hashed", pa.array(hashed, pa.bool_())).drop_columns(["_rowid"])


def group_keys(rows: list[dict], threshold: int, embeddings: dict[tuple[str, int], np.ndarray] | None = None,
               embedding_threshold: float = 0.0) -> list[str | None]:
    """The anchor keys of one group's steps, in the order of `rows`; with `embeddings`, steps
    without a tree are keyed by theirs."""
    keys: list[str | None] = [None] * len(rows)
    hashed = []
    for index, row in enumerate(rows):
        if row["ui_tree_hash"] is not None:
            keys[index] = f"ui:{row['ui_tree_hash']}"
        elif row["image_phash"] is not None:
            hashed.append(index)
    if embeddings is not None:
        vectors = [embeddings[(rows[i]["episode_id"], rows[i]["step"])] for i in hashed]
        found = embedding_anchor_keys(vectors, embedding_threshold)
    else:
        found = group_anchor_keys([rows[i]["image_phash"] for i in hashed], threshold)
    for index, key in zip(hashed, found, strict=True):
        keys[index] = key
    return keys


def rekey_anchors(lake: Lake, *, set_name: str | None = None, where: str | None = None,
                  threshold: int = DEFAULT_THRESHOLD, embedding_threshold: float | None = None,
                  ray: RayOptions | None = None) -> RekeyReport:
    """Recompute the anchor keys of the grouped episodes of a set, of a condition over
    `episodes JOIN steps` (chosen as an export chooses: `selection.select_episodes`), or
    (neither given) of the whole lake; store them with the perceptual hashes computed on the
    way. `embedding_threshold` keys steps without a tree by embedding."""
    if not 0 <= threshold < 64:
        raise InvalidInput(f"threshold: must be 0..63 bits, not {threshold}")
    if embedding_threshold is not None and not 0 <= embedding_threshold <= 2:
        raise InvalidInput(f"embedding_threshold: must be a distance in 0..2, not {embedding_threshold}")
    lake.check_writable()
    chosen = select_episodes(lake, set_name=set_name, where=where) if set_name or where else None
    grouped = lake.sql("SELECT episode_id, group_id FROM episodes WHERE group_id IS NOT NULL")
    group_of = dict(zip(grouped["episode_id"].to_pylist(), grouped["group_id"].to_pylist(),
                        strict=True))
    ids = sorted(group_of if chosen is None else [e for e in chosen if e in group_of])
    report = RekeyReport()
    if not ids:
        return report
    steps = lake.dataset("steps")  # one version for every part
    parts = [fragment.fragment_id for fragment in steps.get_fragments()]
    embeddings = None if embedding_threshold is None else stored_embeddings(steps, ids, "embedding_threshold")
    by_group: dict[str, list[dict]] = defaultdict(list)
    for table in run_parts(fragment_hashes, parts, steps, ids, ray=ray):
        for row in table.to_pylist():
            by_group[group_of[row["episode_id"]]].append(row)
    updates = []
    for group in sorted(by_group):
        rows = sorted(by_group[group], key=lambda r: (r["episode_id"], r["step"]))
        keys = group_keys(rows, threshold, embeddings, embedding_threshold or 0.0)
        for row, key in zip(rows, keys, strict=True):
            if key != row["anchor_key"] or row["hashed"]:
                updates.append({"episode_id": row["episode_id"], "step": row["step"],
                                "anchor_key": key, "image_phash": row["image_phash"]})
            report.changed += key != row["anchor_key"]
            report.hashed += row["hashed"]
        report.steps += len(rows)
    report.groups = len(by_group)
    if updates:
        update_columns(lake, "steps", updates)
    return report
