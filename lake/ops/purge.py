"""Purge: remove episodes for good, from the current version, every older version and every tag.

Edits (`episodelake.lake.ops.edits`) and upserts leave the previous state readable in older
versions: time travel is a feature. A purge is the one operation that takes data out of the
lake's history. For the selected episodes it removes every row of every table keyed by
`episode_id` (`EPISODE_TABLES`: steps with their screenshots, the episode rows, set
memberships, annotations), and then proves it:

1. **Current version.** Each table's fragments holding a selected row (live, or a stale copy
   an upsert left behind) are rewritten without it: their other rows are read (screenshot
   bytes included) into new data files, and one Lance `Update` commit swaps the old
   fragments for the new. Fragments without a selected row are not touched.
2. **Tags.** A tag pinning a version that holds selected rows is re-created on that
   version's content minus the purged rows: the tagged version is restored as a new version,
   rewritten as in 1, the tag moved onto it, and the current version restored on top. So a
   tag still means "the lake as it was when the tag was taken", minus the purged episodes
   (sets pinned to it keep their meaning); its version number changes.
3. **Older versions.** Every untagged version but the latest is pruned
   (`cleanup_old_versions`), which deletes the data files only they referenced, on local
   disk and on object stores alike.
4. **Indexes.** Full-text and vector indexes hold what they index (words, embeddings),
   encoded where no byte scan sees it: every one of them on an episode table is dropped in
   each version the purge writes (`elake enrich` builds them again). Key indexes hold ids
   only and are kept.
5. **Files beside the tables.** Cached thumbnails of the purged screenshots are deleted.
   Exports that hold the data (in the lake's `_exports`, or any export's folder recorded in
   `exports`) are listed, and deleted with `delete_exports`.
6. **Proof.** Every remaining version of every purged table is read with deleted rows
   included: no row of a purged episode and no purged screenshot's digest is left. Then
   every file of the lake (and of its local state folder) is read byte by byte: none holds
   a purged screenshot's sha256 (hex text, also in file names), its bytes, or a goal text
   only purged episodes had. Digests, screenshots and goals that episodes not purged share
   are kept and reported, not searched for. (Goal words inside full-text indexes are
   encoded; 4 is what removes them.)

A purge runs as a job (`jobs` table, kind `purge`): who, when, the episode ids, the SHA-256
of the `--where` text (never the text: it may name what is purged) and counts. It records
nothing of the purged content. A purge that stopped (killed, a store outage) is finished by
running `purge` again: an unfinished purge job is resumed first, from what its record says.
Until its job reads `done`, a purge is not complete, whatever the tables show.

A purge needs the lake to itself: no writer may be recording and no server running, because
pruning deletes unverified files that a live writer may still commit. Writers, unreplayed
spools of dead writers and processes holding a jobs lock (`elake serve`) on this machine are
refused; stop every other machine's writers and servers yourself.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pyarrow.compute as pc

from episodelake.lake.ops import jobs
from episodelake.lake.storage import layout, schema, tables
from episodelake.lake.storage.errors import InvalidInput, LakeError, NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.sql import sql_in
from episodelake.lake.storage.store import Location, store_errors

log = logging.getLogger(__name__)

#: The job kind a purge is recorded as.
KIND = "purge"
#: Tables whose rows belong to an episode, children before parents (a reader resolves
#: children first, so no reader sees a step whose episode is gone before the step).
EPISODE_TABLES: tuple[str, ...] = tuple(t for t in tables.SNAPSHOT_ORDER
                                        if "episode_id" in schema.TABLES[t].names)
#: Screenshot bytes held in memory to search every file for, at most (a selection of many
#: episodes searches the first screenshots' bytes whole and every digest).
MAX_SCREENSHOT_BYTES = 512 << 20
#: Goal texts shorter than this are not searched for in files (they occur by chance).
MIN_TEXT_CHARS = 8
#: Files are read in chunks this big (with an overlap as long as the longest needle).
CHUNK_BYTES = 16 << 20
#: Rows per batch when a fragment's kept rows are copied (screenshots included).
COPY_BATCH_ROWS = 256


@dataclass
class Needles:
    """What must not be found anywhere after a purge. Held in memory only, never written."""

    digests: set[str] = field(default_factory=set)
    screenshots: dict[str, bytes] = field(default_factory=dict)  # digest -> the bytes
    texts: set[str] = field(default_factory=set)
    #: digests / goal texts that episodes not purged also have (kept, not searched for)
    shared_digests: set[str] = field(default_factory=set)
    shared_texts: int = 0

    def patterns(self) -> list[bytes]:
        out = [d.encode() for d in self.digests]
        out += [self.screenshots[d] for d in self.digests if d in self.screenshots]
        out += [t.encode() for t in self.texts]
        return out


# -- selection ---------------------------------------------------------------------------
def select(lake: Lake, *, where: str | None = None, episode_ids: Iterable[str] = ()) -> list[str]:
    """The episode ids a purge selects: `where`, a SQL condition over the
    current `episodes` table, or ids, each in the lake now or in any older version or tag
    (a deleted episode can still be purged by id). Unknown ids and an empty match are
    `NotFound` / `InvalidInput`, one line each."""
    ids = [layout.check_id(i, "episode_id") for i in episode_ids]
    if (where is None) == (not ids):
        raise InvalidInput("give episode ids or --where SQL (one of the two)")
    if where is not None:
        found = lake.matching("SELECT DISTINCT episode_id FROM episodes", where)
        ids = sorted(found["episode_id"].to_pylist())
        if not ids:
            raise InvalidInput(f"--where matches no episode: {where}")
        return ids
    ids = sorted(set(ids))
    missing = [i for i in ids if not _held_anywhere(lake, i)]
    if missing:
        raise NotFound(f"unknown episode id(s): {', '.join(missing)} (in no version of the lake)")
    return ids


def _held_anywhere(lake: Lake, episode_id: str) -> bool:
    where = sql_in("episode_id", [episode_id])
    for table in ("episodes", "steps"):
        ds = lake.dataset(table)
        if ds.count_rows(filter=where):
            return True
        if any(_with_deleted(v, ["episode_id"], where, fragments).num_rows for v, fragments in _new_fragments(ds)):
            return True
    return False


def _versions_to_check(ds: lance.LanceDataset) -> list[int]:
    return sorted({v["version"] for v in ds.versions()} - {ds.version}, reverse=True)


# -- the fragments that hold an episode's rows ---------------------------------------------------
def _affected(ds: lance.LanceDataset, ids: list[str]) -> dict[int, int]:
    """fragment id -> rows of `ids` it holds, deleted rows included (an upsert or a delete
    leaves the old row's bytes in its fragment). A deleted row has no address, so fragments
    with deletions are asked one by one."""
    if not ids or not ds.get_fragments():
        return {}
    where = sql_in("episode_id", ids)
    live = ds.scanner(columns=["episode_id"], filter=where, with_row_address=True,
                      use_scalar_index=False).to_table()
    out: dict[int, int] = {}
    for fid in pc.shift_right(live["_rowaddr"], 32).to_pylist():
        out[fid] = out.get(fid, 0) + 1
    for fragment in ds.get_fragments():
        if fragment.metadata.deletion_file is None:
            continue
        dead = _with_deleted(ds, ["episode_id"], where, [fragment])
        dead_rows = sum(1 for r in dead["_rowid"].to_pylist() if r is None)
        if dead_rows:
            out[fragment.fragment_id] = out.get(fragment.fragment_id, 0) + dead_rows
    return out


def _with_deleted(ds: lance.LanceDataset, columns: list[str], where: str,
                  fragments: list[lance.LanceFragment] | None = None) -> pa.Table:
    """`columns` (with `_rowid`, null for a deleted row) of the rows matching `where`,
    deleted rows included."""
    return ds.scanner(columns=columns, filter=where, with_row_id=True, include_deleted_rows=True,
                      use_scalar_index=False, late_materialization=False, fragments=fragments).to_table()


@dataclass
class Rewrite:
    """What rewriting one version of one table did."""

    fragments: int = 0
    rows_removed: int = 0
    rows_copied: int = 0
    bytes_written: int = 0
    indexes_dropped: list[str] = field(default_factory=list)


#: A fragment (`_fragment_key`) -> the new fragments that hold its kept rows, so a fragment
#: shared by the current version and a tagged one is copied once, and both versions refer
#: to the same new files.
Copies = dict[tuple, list[lance.FragmentMetadata]]


def _fragment_key(fragment: lance.LanceFragment) -> tuple:
    """What makes a fragment's rows what they are: its id, its data files (an update of
    some columns adds files to the same id) and its deletions."""
    meta = fragment.metadata
    return fragment.fragment_id, tuple(f.path for f in meta.files), repr(meta.deletion_file)


def _rewrite_latest(loc: Location, table: str, ids: list[str], copies: Copies | None = None) -> Rewrite:
    """Rewrite the fragments of `table`'s latest version that hold rows of `ids`, without
    those rows, as one commit (retried on conflicts, planned again each time)."""
    copies = {} if copies is None else copies

    def attempt() -> Rewrite:
        ds = tables.open_table(loc, table)
        hit = _affected(ds, ids)
        done = Rewrite()
        if not hit:
            return done
        keep = f"NOT ({sql_in('episode_id', ids)})"
        target = _target_schema(ds, table)
        new_fragments: list[lance.FragmentMetadata] = []
        for fid in sorted(hit):
            fragment = ds.get_fragment(fid)
            if fragment is None:  # found in this very version a moment ago
                raise LakeError(f"{table}: fragment {fid} vanished from version {ds.version}")
            live = fragment.count_rows()
            kept = fragment.count_rows(filter=keep)
            done.rows_removed += live - kept
            key = _fragment_key(fragment)
            if key in copies:
                new_fragments += copies[key]
                continue
            done.fragments += 1
            done.rows_copied += kept
            copied = _copy_rows(loc, ds, fragment, keep, target) if kept else []
            done.bytes_written += sum(_fragment_bytes(loc, table, f) for f in copied)
            copies[key] = copied
            new_fragments += copied
        op = lance.LanceOperation.Update(removed_fragment_ids=sorted(hit), new_fragments=new_fragments)
        lance.LanceDataset.commit(ds, op, read_version=ds.version)
        return done

    with store_errors(loc):
        done = tables.retry_commit(f"purge {table}", attempt)
        done.indexes_dropped = _drop_content_indexes(loc, table)
    return done


def _target_schema(ds: lance.LanceDataset, table: str) -> pa.Schema:
    wanted = schema.TABLES[table]
    if set(ds.schema.names) != set(wanted.names):
        raise LakeError(f"table {table!r} has columns {sorted(ds.schema.names)}, this release writes "
                        f"{sorted(wanted.names)}: open the lake for writing once (any command) and purge again")
    return pa.schema([wanted.field(n) for n in ds.schema.names])


def _copy_rows(loc: Location, ds: lance.LanceDataset, fragment: lance.LanceFragment, keep: str,
               target: pa.Schema) -> list[lance.FragmentMetadata]:
    """New data files holding the fragment's live rows that match `keep`, bytes as stored."""
    scanner = ds.scanner(columns=target.names, filter=keep, fragments=[fragment], batch_size=COPY_BATCH_ROWS,
                         blob_handling="all_binary", scan_in_order=True)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in scanner.to_batches():
            yield pa.RecordBatch.from_arrays([batch.column(n) for n in target.names], schema=target)

    reader = pa.RecordBatchReader.from_batches(target, batches())
    return lance.fragment.write_fragments(reader, ds, schema=target, mode="append",
                                          data_storage_version=ds.data_storage_version,
                                          storage_options=None if loc.is_local else loc.storage_options)


def _fragment_bytes(loc: Location, table: str, fragment: lance.FragmentMetadata) -> int:
    """Bytes of a new fragment's files: its data files and their blob files beside them."""
    total = 0
    data = layout.table_path(loc, table) / "data"
    for f in fragment.files:
        size = f.file_size_bytes
        total += size if size else (data / f.path).size()
        blobs = data / f.path.removesuffix(".lance")
        if blobs.exists():
            total += blobs.size()
    return total


def _drop_content_indexes(loc: Location, table: str) -> list[str]:
    """Drop every index of the latest version but the key index: full-text and vector
    indexes hold what they index (words, embeddings), purged rows' too. Idempotent, so a
    resumed purge drops what a stopped one may not have."""
    dropped = []
    key_index = f"{schema.KEYS[table][0]}_idx"
    for name in sorted({i.name for i in tables.open_table(loc, table).describe_indices()} - {key_index}):
        tables.retry_commit(f"drop index {name}", functools.partial(_drop_index, loc, table, name))
        dropped.append(name)
    return dropped


def _drop_index(loc: Location, table: str, name: str) -> None:
    tables.open_table(loc, table).drop_index(name)


# -- tags ----------------------------------------------------------------------------------
def _tags_holding(ds: lance.LanceDataset, ids: list[str]) -> dict[int, list[str]]:
    """version -> tags pinning it, for the tagged versions holding rows
    of `ids`."""
    by_version: dict[int, list[str]] = {}
    for name, info in ds.tags.list().items():
        version = info["version"] if isinstance(info, dict) else info.version
        by_version.setdefault(version, []).append(name)
    return {v: sorted(names) for v, names in sorted(by_version.items())
            if _affected(ds.checkout_version(v), ids)}


def _recreate_tags(loc: Location, table: str, ids: list[str], main: int,
                   copies: Copies | None = None) -> tuple[dict[str, int], Rewrite]:
    """Re-create each tag of `table` pinning purged rows on its content minus them, then put
    `main` (the purged current version) back on top. Returns tag -> new version."""
    moved: dict[str, int] = {}
    total = Rewrite()
    ds = tables.open_table(loc, table)
    for version, names in _tags_holding(ds, ids).items():
        with store_errors(loc):
            tables.open_table(loc, table, version=version).restore()
        done = _rewrite_latest(loc, table, ids, copies)
        total.fragments += done.fragments
        total.rows_removed += done.rows_removed
        total.bytes_written += done.bytes_written
        total.indexes_dropped += [i for i in done.indexes_dropped if i not in total.indexes_dropped]
        ds = tables.open_table(loc, table)
        for name in names:
            ds.tags.update(name, ds.version)
            moved[name] = ds.version
    ds = tables.open_table(loc, table)
    if ds.version != main and not _same_content(ds, tables.open_table(loc, table, version=main)):
        with store_errors(loc):
            tables.open_table(loc, table, version=main).restore()
    return moved, total


def _same_content(a: lance.LanceDataset, b: lance.LanceDataset) -> bool:
    return sorted(map(_fragment_key, a.get_fragments())) == sorted(map(_fragment_key, b.get_fragments()))


def _prune(loc: Location, table: str) -> int:
    """Remove every version but the latest and the tagged ones, and their files."""
    def cleanup() -> int:
        stats = tables.open_table(loc, table).cleanup_old_versions(
            older_than=timedelta(0), delete_unverified=True, error_if_tagged_old_versions=False)
        return int(stats.old_versions)

    with store_errors(loc):
        return tables.retry_commit(f"prune {table}", cleanup)


# -- what to search for ----------------------------------------------------------------------
def _every_version(ds: lance.LanceDataset) -> Iterator[lance.LanceDataset]:
    yield ds
    for version in _versions_to_check(ds):
        yield ds.checkout_version(version)


def _new_fragments(ds: lance.LanceDataset) -> Iterator[tuple[lance.LanceDataset, list[lance.LanceFragment]]]:
    """Each version with its fragments that no later version has as they are (same files,
    same deletions): versions share most fragments, so each is read once, not once a version."""
    seen: set[tuple] = set()
    for version in _every_version(ds):
        fresh = []
        for fragment in version.get_fragments():
            key = _fragment_key(fragment)
            if key not in seen:
                seen.add(key)
                fresh.append(fragment)
        if fresh:
            yield version, fresh


def collect_needles(lake: Lake, ids: list[str]) -> Needles:
    """The digests, screenshot bytes and goal texts of `ids` over every version (read
    before the purge; afterwards they are gone)."""
    needles = Needles()
    where = sql_in("episode_id", ids)
    held = 0
    for ds, fragments in _new_fragments(lake.dataset("steps")):
        found = _with_deleted(ds, ["episode_id", "image_sha256"], where, fragments)
        fresh = [(d, r) for d, r in zip(found["image_sha256"].to_pylist(), found["_rowid"].to_pylist(),
                                        strict=True) if d and d not in needles.screenshots and r is not None]
        needles.digests.update(d for d in found["image_sha256"].to_pylist() if d)
        if fresh:
            blobs = ds.take_blobs("image", ids=[r for _, r in fresh])
            for (digest, _), blob in zip(fresh, blobs, strict=True):
                if blob is not None and held < MAX_SCREENSHOT_BYTES:
                    needles.screenshots[digest] = blob.read()
                    held += len(needles.screenshots[digest])
    for ds, fragments in _new_fragments(lake.dataset("episodes")):
        found = _with_deleted(ds, ["episode_id", "task_goal"], where, fragments)
        needles.texts.update(t for t in found["task_goal"].to_pylist() if t and len(t) >= MIN_TEXT_CHARS)
    return needles


def _drop_shared(lake: Lake, ids: list[str], needles: Needles) -> None:
    """Leave out what episodes not purged also hold (checked over every remaining version)."""
    keep = f"NOT ({sql_in('episode_id', ids)})"
    if needles.digests:
        for ds in _every_version(tables.open_table(lake.location, "steps")):
            found = ds.to_table(columns=["image_sha256"],
                                filter=f"{keep} AND {sql_in('image_sha256', sorted(needles.digests))}")
            needles.shared_digests.update(found["image_sha256"].to_pylist())
        needles.digests -= needles.shared_digests
    if needles.texts:
        shared: set[str] = set()
        for ds in _every_version(tables.open_table(lake.location, "episodes")):
            found = ds.to_table(columns=["task_goal"], filter=f"{keep} AND {sql_in('task_goal', sorted(needles.texts))}")
            shared.update(found["task_goal"].to_pylist())
        needles.shared_texts = len(shared)
        needles.texts -= shared


# -- proof -----------------------------------------------------------------------------------
@dataclass
class Proof:
    versions_checked: int = 0
    rows_found: int = 0
    files_scanned: int = 0
    bytes_scanned: int = 0
    digests: int = 0
    screenshots: int = 0
    texts: int = 0
    #: files still holding a needle: in the tables (a failed purge), or in exports
    hits: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"versions_checked": self.versions_checked, "rows_found": self.rows_found,
                "files_scanned": self.files_scanned, "bytes_scanned": self.bytes_scanned,
                "digests_searched": self.digests, "screenshots_searched": self.screenshots,
                "texts_searched": self.texts, "files_holding": len(self.hits)}


def prove(lake: Lake, ids: list[str], needles: Needles, extra_roots: Iterable[Path] = ()) -> Proof:
    """Check every remaining version of the purged tables and every file of the lake."""
    proof = Proof(digests=len(needles.digests), screenshots=sum(d in needles.screenshots for d in needles.digests),
                  texts=len(needles.texts))
    where = sql_in("episode_id", ids)
    for table in EPISODE_TABLES:
        for ds in _every_version(tables.open_table(lake.location, table)):
            proof.versions_checked += 1
            proof.rows_found += _with_deleted(ds, ["episode_id"], where).num_rows
            if table == "steps" and needles.digests:
                proof.rows_found += ds.count_rows(filter=sql_in("image_sha256", sorted(needles.digests)))
    matcher = Matcher(needles.patterns())
    for label, size, read in lake_files(lake, extra_roots):
        proof.files_scanned += 1
        proof.bytes_scanned += size
        named = any(d in needles.digests for d in _HEX64.findall(label))
        if named or matcher.holds(read):
            proof.hits.append(label)
    return proof


def lake_files(lake: Lake, extra_roots: Iterable[Path] = ()) -> Iterator[tuple[str, int, Callable[[], Iterator[bytes]]]]:
    """Every file of the lake, with its size and a reader of its chunks: the tables (local
    or on the object store), the lake's local folders (spool, locks, cache, exports) and
    `extra_roots` (export folders outside the lake)."""
    loc = lake.location
    roots = [] if not loc.is_local else [loc.local]
    if not loc.is_local:
        yield from _store_files(loc)
        roots.append(layout.local_state(loc))
    roots += [Path(r) for r in extra_roots]
    seen: set[Path] = set()
    for root in roots:
        for folder, _, files in os.walk(root):
            for name in files:
                path = Path(folder) / name
                if path in seen or path.is_symlink():
                    continue
                seen.add(path)
                yield str(path), path.stat().st_size, _local_reader(path)


def _local_reader(path: Path) -> Callable[[], Iterator[bytes]]:
    def read() -> Iterator[bytes]:
        with open(path, "rb") as fh:
            while chunk := fh.read(CHUNK_BYTES):
                yield chunk
    return read


def _store_files(loc: Location) -> Iterator[tuple[str, int, Callable[[], Iterator[bytes]]]]:
    import pyarrow.fs as pafs

    fs, root = loc.filesystem()
    with store_errors(loc):
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    for info in infos:
        if info.type != pafs.FileType.File:
            continue

        def read(path: str = info.path) -> Iterator[bytes]:
            with store_errors(loc), fs.open_input_stream(path) as fh:
                while chunk := fh.read(CHUNK_BYTES):
                    yield chunk
        yield f"{loc.scheme}://{info.path}", info.size or 0, read


class Matcher:
    """Finds whether any of many byte patterns occurs in a stream of chunks.

    A few patterns are searched one by one (`bytes.find`, gigabytes a second). Many (a purge
    of many episodes) would cost a pass each, so then each pattern is known by one 8-byte
    anchor of its own, every 8-byte window of a chunk is looked up among the anchors at once
    (numpy), and only the patterns whose anchor occurs are compared in full."""

    #: Up to this many patterns, one pass each is faster (about 17 GB/s a pattern, against
    #: about 20 MB/s for the anchors' pass whatever their number).
    FEW = 512
    ANCHOR = 8

    def __init__(self, patterns: Iterable[bytes]):
        self.patterns = sorted({p for p in patterns if p}, key=len)
        self.overlap = max((len(p) for p in self.patterns), default=1) - 1
        self.anchors: dict[int, list[tuple[bytes, int]]] = {}
        if len(self.patterns) > self.FEW:
            for pattern in self.patterns:
                offset = self._anchor_offset(pattern)
                key = int.from_bytes(pattern[offset:offset + self.ANCHOR], "little")
                self.anchors.setdefault(key, []).append((pattern, offset))
        self.short = [p for p in self.patterns if len(p) < self.ANCHOR]
        self._filter: Any = None  # numpy bool table, built on first use

    def _anchor_offset(self, pattern: bytes) -> int:
        """An offset whose 8 bytes are all different (rare by chance in compressed data),
        from the middle on; else the middle."""
        if len(pattern) < self.ANCHOR:
            return 0
        middle = (len(pattern) - self.ANCHOR) // 2
        for offset in range(middle, len(pattern) - self.ANCHOR + 1):
            if len(set(pattern[offset:offset + self.ANCHOR])) == self.ANCHOR:
                return offset
        return middle

    def found_in(self, data: bytes) -> bool:
        if not self.anchors:
            return any(p in data for p in self.patterns)
        if any(p in data for p in self.short):
            return True
        import numpy as np

        raw = np.frombuffer(data, dtype=np.uint8)
        n = raw.size - self.ANCHOR + 1
        if n <= 0:
            return False
        if self._filter is None:  # which 3-byte starts an anchor has: 16 MB, built once
            self._filter = np.zeros(1 << 24, dtype=bool)
            self._filter[np.fromiter(self.anchors, dtype=np.uint64) & np.uint64(0xFFFFFF)] = True
        starts = raw[:n].astype(np.uint32) | raw[1:n + 1].astype(np.uint32) << 8 | raw[2:n + 2].astype(np.uint32) << 16
        for position in np.flatnonzero(self._filter[starts]).tolist():
            for pattern, offset in self.anchors.get(int.from_bytes(data[position:position + self.ANCHOR], "little"), ()):
                start = position - offset
                if start >= 0 and data[start:start + len(pattern)] == pattern:
                    return True
        return False

    def holds(self, read: Callable[[], Iterator[bytes]]) -> bool:
        if not self.patterns:
            return False
        tail = b""
        for chunk in read():
            data = tail + chunk
            if self.found_in(data):
                return True
            tail = data[-self.overlap:] if self.overlap else b""
        return False


_HEX64 = re.compile(r"[0-9a-f]{64}")


# -- files beside the tables -----------------------------------------------------------------
def _delete_thumbnails(lake: Lake, digests: Iterable[str]) -> int:
    removed = 0
    for digest in digests:
        folder = layout.thumbnail_path(lake.location, digest, 0).parent
        for path in folder.glob(f"{digest}-*") if folder.is_dir() else ():
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def _export_folders(lake: Lake) -> dict[str, Path]:
    """export id -> its folder on this machine, for every recorded export whose folder is
    here (the lake's `_exports` and any `out_dir` recorded)."""
    out: dict[str, Path] = {}
    rows = lake.dataset("exports").to_table(columns=["export_id", "out_dir"]).to_pylist()
    for row in rows:
        if row["out_dir"] and Path(row["out_dir"]).is_dir():
            out[row["export_id"]] = Path(row["out_dir"]).resolve()
    root = layout.exports_root(lake.location)
    if root.is_dir():
        for folder in root.iterdir():
            if folder.is_dir():
                out.setdefault(folder.name, folder.resolve())
    return out


def _exports_holding(lake: Lake, needles: Needles) -> dict[str, Path]:
    matcher = Matcher(needles.patterns())
    if not matcher.patterns:
        return {}
    holding = {}
    for export_id, folder in _export_folders(lake).items():
        for path in folder.rglob("*"):
            if path.is_file() and matcher.holds(_local_reader(path)):
                holding[export_id] = folder
                break
    return holding


# -- refusing to run beside writers --------------------------------------------------------------
def check_exclusive(lake: Lake) -> None:
    """Refuse while a writer of this machine is live, a dead writer's spool waits for replay
    (it may hold rows of the episodes to purge), or another process of this machine that runs
    jobs on the lake (a server, a notebook) is alive: a purge prunes files they may still use."""
    root = layout.spool_root(lake.location)
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        state = layout.lock_state(folder / layout.SPOOL_LOCK)
        if state == "alive":
            raise InvalidInput(f"a writer is recording into the lake (spool {folder.name}): stop it, then purge")
        if any(folder.glob(f"*{layout.SPOOL_SUFFIX}")):
            raise InvalidInput("a crashed writer's spool is not replayed yet: run `elake recover`, then purge")
    own = jobs.process_owner(lake.path).path
    for lock in sorted(own.parent.glob("jobs-*.lock")):
        if lock != own and layout.lock_state(lock) == "alive":
            raise InvalidInput("another process runs jobs on this lake (a server, a notebook): stop it, then purge")


# -- the purge -------------------------------------------------------------------------------
@dataclass
class PurgePlan:
    """What a purge would remove (a dry run's answer)."""

    episode_ids: list[str]
    rows: dict[str, int]  # table -> rows of the episodes in the current version
    fragments: dict[str, int]  # table -> fragments of the current version to rewrite
    tags: dict[str, list[str]]  # table -> tags that will be re-created
    versions: dict[str, int]  # table -> versions that will be pruned
    screenshots: int

    def summary(self) -> dict:
        return {"episodes": len(self.episode_ids), "episode_ids": self.episode_ids, "rows": self.rows,
                "fragments_to_rewrite": self.fragments, "tags_to_recreate": self.tags,
                "versions_to_prune": self.versions, "screenshots": self.screenshots}


def plan(lake: Lake, ids: list[str]) -> PurgePlan:
    rows, fragments, tags, versions = {}, {}, {}, {}
    where = sql_in("episode_id", ids)
    screenshots = 0
    for table in EPISODE_TABLES:
        ds = lake.dataset(table)
        rows[table] = ds.count_rows(filter=where)
        fragments[table] = len(_affected(ds, ids))
        tags[table] = sorted(n for names in _tags_holding(ds, ids).values() for n in names)
        tagged = {(i["version"] if isinstance(i, dict) else i.version) for i in ds.tags.list().values()}
        versions[table] = len([v for v in _versions_to_check(ds) if v not in tagged])
        if table == "steps":
            screenshots = ds.count_rows(filter=f"{where} AND image_sha256 IS NOT NULL")
    return PurgePlan(ids, rows, fragments, tags, versions, screenshots)


def where_digest(where: str | None) -> str | None:
    return None if where is None else hashlib.sha256(where.encode()).hexdigest()


def unfinished(lake: Lake) -> list[dict]:
    """Purge jobs that started and never ended `done` (killed, failed), oldest first."""
    rows = [j for j in jobs.list_jobs(lake, kind=KIND, limit=None) if j["status"] != "done"]
    alive = [j for j in rows if j["status"] in jobs.ACTIVE]
    if alive:
        raise InvalidInput(f"purge {alive[0]['job_id']} is running in another process: wait for it to end")
    return sorted((j for j in rows if (j["params"] or {}).get("episode_ids")), key=lambda j: j["created_at"])


def purge(lake: Lake, ids: list[str], *, where: str | None = None, delete_exports: bool = False,
          who: str | None = None, job: jobs.Job | None = None,
          progress: Callable[[int, int], None] | None = None) -> dict:
    """Purge the episodes `ids` (see the module docstring); returns the report, which is
    also the job's recorded result. `where`: the condition they were selected by (only its
    SHA-256 is recorded)."""
    lake.check_writable()
    if not ids:
        raise InvalidInput("nothing to purge: the selection matches no episode")
    check_exclusive(lake)
    with tables.file_lock(layout.lock_path(lake.location, "purge")):
        job = job or jobs.Job(lake, KIND, who=who, progress_interval_s=0.0,
                              params={"episode_ids": ids, "where_sha256": where_digest(where),
                                      "delete_exports": delete_exports})
        job.listen(progress)
        with job.recording():
            return _run(lake, ids, delete_exports, job)


def resume(lake: Lake, record: dict, *, progress: Callable[[int, int], None] | None = None) -> dict:
    """Finish an unfinished purge job from its record."""
    params = record["params"]
    job = jobs.Job(lake, KIND, job_id=record["job_id"], params=params, who=record["who"], progress_interval_s=0.0)
    job.result = dict(record.get("result") or {})
    job.created_at = record["created_at"]
    return purge(lake, list(params["episode_ids"]), delete_exports=bool(params.get("delete_exports")),
                 job=job, progress=progress)


def _run(lake: Lake, ids: list[str], delete_exports: bool, job: jobs.Job) -> dict:
    """The purge's steps, each recorded in the job's result as it ends, so a purge that
    stopped resumes where it was: `main` holds each table's purged current version once it
    is written (the tags' re-creation moves the latest version away from it and back)."""
    started = time.monotonic()
    loc = lake.location
    state = job.result or {}
    job.result = state
    main: dict[str, int] = state.setdefault("main", {})
    report: dict = state.setdefault("report", {
        "episodes": len(ids), "rows_removed": {}, "fragments_rewritten": {}, "bytes_rewritten": 0,
        "tags_recreated": {}, "versions_removed": {}, "indexes_dropped": {}})
    if "lake_bytes_before" not in report:
        report["lake_bytes_before"] = sum(layout.table_path(loc, t).size() for t in EPISODE_TABLES)
    total = 2 * len(EPISODE_TABLES) + 2
    done = 0
    job.progress(done, total)
    needles = collect_needles(lake, ids)

    def note(rewrite: Rewrite, table: str) -> None:
        report["bytes_rewritten"] += rewrite.bytes_written
        dropped = report["indexes_dropped"].setdefault(table, [])
        dropped += [i for i in rewrite.indexes_dropped if i not in dropped]
        if not dropped:
            del report["indexes_dropped"][table]

    for table in EPISODE_TABLES:
        copies: Copies = {}
        if table not in main:
            current = _rewrite_latest(loc, table, ids, copies)
            report["rows_removed"][table] = current.rows_removed
            report["fragments_rewritten"][table] = current.fragments
            note(current, table)
            main[table] = tables.open_table(loc, table).version
        done += 1
        job.progress(done, total)  # records the purged current version before tags move away from it
        moved, rewrite = _recreate_tags(loc, table, ids, main[table], copies)
        report["fragments_rewritten"][table] = report["fragments_rewritten"].get(table, 0) + rewrite.fragments
        for name, version in moved.items():
            report["tags_recreated"].setdefault(name, {})[table] = version
        note(rewrite, table)
        done += 1
        job.progress(done, total)
    for table in EPISODE_TABLES:
        report["versions_removed"][table] = report["versions_removed"].get(table, 0) + _prune(loc, table)
    lake.invalidate()
    _drop_shared(lake, ids, needles)
    report["thumbnails_deleted"] = _delete_thumbnails(lake, needles.digests)
    holding = _exports_holding(lake, needles)
    report["exports_holding"] = sorted(holding)
    if delete_exports:
        for folder in holding.values():
            shutil.rmtree(folder)
        report["exports_deleted"] = sorted(holding)
    done += 1
    job.progress(done, total)
    proving = time.monotonic()
    proof = prove(lake, ids, needles)
    report["proof_s"] = round(time.monotonic() - proving, 3)
    kept_exports = [] if delete_exports else [str(f) for f in holding.values()]
    leftovers = [h for h in proof.hits if not any(h.startswith(f) for f in kept_exports)]
    report["shared_kept"] = {"screenshots": len(needles.shared_digests), "goal_texts": needles.shared_texts}
    report["proof"] = proof.summary()
    report["elapsed_s"] = round(report.get("elapsed_s", 0) + time.monotonic() - started, 3)
    if proof.rows_found or leftovers:
        shown = ", ".join(leftovers[:5]) + (" ..." if len(leftovers) > 5 else "")
        raise LakeError(f"purge incomplete: {proof.rows_found} row(s) and {len(leftovers)} file(s) still hold "
                        f"purged data ({shown}); run `elake purge` again to finish it")
    done += 1
    job.progress(done, total)
    return {"job_id": job.job_id, **report}
