"""`Lake`: the front object over one lake folder (reader, SQL, versions, maintenance, writes).

Reads go through cached dataset handles; each read checks for a newer version (cheap: the
latest manifest) unless `refresh_s` asks to check less often, so a change made by any writer
is visible to the next query. A `Lake` opened at a tag is read-only and frozen.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import lance
import pyarrow as pa
from lance.dataset import Version

from episodelake.lake.storage import layout, schema, tables
from episodelake.lake.storage import sql as lake_sql
from episodelake.lake.storage.errors import (
    EpisodeLakeError,
    InvalidInput,
    LakeCorrupt,
    LakeError,
    NotFound,
    SqlRefused,
)
from episodelake.lake.storage.group_commit import GroupCommit
from episodelake.lake.storage.images import sniff_format
from episodelake.lake.storage.sql import sql_in, sql_string
from episodelake.lake.storage.store import Location, location, store_errors
from episodelake.lake.storage.writer import LakeWriter, WriterOptions, replay_orphans

log = logging.getLogger(__name__)


T = TypeVar("T")

#: Makes a change's audit entries from the rows its keys held before (see `Lake.upsert`).
Audited = Callable[[list[dict | None]], list[dict]]


@dataclass(frozen=True)
class Refers:
    """A row of another table that a write needs (a member's episode): checked in the
    write's group-commit round, one scan for the whole round, and handed back to the caller.
    A write whose row is missing is refused with `missing` (NotFound), its rows left out;
    the round's other writes are stored."""

    table: str
    key: str
    columns: tuple[str, ...]
    missing: str


@dataclass(frozen=True)
class _Write:
    """One caller's rows in a group-commit round, how to audit them and what they need."""

    rows: pa.Table
    audited: Audited | None
    refers: Refers | None = None


class Lake:
    def __init__(self, path: Location | Path | str | None = None, *, tag: str | None = None,
                 create: bool = True, refresh_s: float = 0.0,
                 storage_options: dict[str, str] | None = None, recall: bool = False):
        #: a folder or an object store (`s3://bucket/prefix`, ...; see `episodelake.lake.storage.store`)
        self.location = location(path, storage_options)
        #: the lake folder; for a lake on an object store, its `Location`
        self.path: Path | Location = self.location.local if self.location.is_local else self.location
        self.tag = tag
        self.refresh_s = refresh_s
        opened: dict[str, lance.LanceDataset] = {}
        started = time.monotonic()
        # `recall` (a recorder's open): a lake on an object store opens without asking the
        # store anything, during an outage and on a machine that never opened it alike; its
        # tables are made sure of (what is missing created) by the first read (`_resolve`), or
        # by a writer on its own thread before its first commit (`LakeWriter._register`)
        if recall and create and tag is None and not self.location.is_local:
            tables.recall_tables(self.location)  # what this machine noted of it, if anything
        else:
            opened = self._check_tables(create, tag)
        #: table -> (when the check for a newer version started, dataset, when it ended); the
        #: tables opened above to check their columns serve the first reads
        checked = time.monotonic()
        self._cache: dict[str, tuple[float, lance.LanceDataset, float]] = {
            table: (started, ds, checked) for table, ds in opened.items()}
        self._sql: lake_sql.SqlEngine | None = None
        self._cache_lock = threading.Lock()
        self._per_version: dict[tuple[str, Callable, int], Any] = {}
        #: called with the table's name after each `upsert` (the server compacts on its own
        #: through this); a listener must return at once
        self.write_listeners: list[Callable[[str], None]] = []
        #: concurrent `upsert`/`insert` calls into one table share commits (see group_commit)
        self.group_commit: GroupCommit[_Write] = GroupCommit()

    def _check_tables(self, create: bool, tag: str | None) -> dict[str, lance.LanceDataset]:
        """Ask the store what the lake holds: create the missing tables (`create`, or a lake
        by an older release), or raise `NotFound` when there is no lake. Returns the tables it
        opened on the way, for the first reads."""
        opened: dict[str, lance.LanceDataset] = {}
        with store_errors(self.location):
            # one listing says what is there; only an empty one asks whether the store (its
            # bucket) is there at all, to say which of the two is missing
            stored = tables.existing_tables(self.location)
            if not stored:
                self.location.check_reachable()
            if create and tag is None:
                self.location.mkdir()
                opened = tables.ensure_tables(self.location, stored)
            elif "steps" not in stored:
                raise NotFound(f"no lake at {self.location}: create one with `elake demo` or by recording into it")
            elif tag is None:
                # A lake made by an older release lacks the tables added since; they are created
                # empty here (an upgrade, not a change of any stored row), so every reader sees
                # the same set of tables.
                opened = tables.ensure_tables(self.location, stored)
        return opened

    # -- datasets ----------------------------------------------------------------------
    def dataset(self, table: str) -> lance.LanceDataset:
        return self._resolve(table)[0]

    def _resolve(self, table: str, checked_after: float = float("-inf")) -> tuple[lance.LanceDataset, float]:
        """(dataset, when its version check ended). A cached handle serves only if its check
        began less than `refresh_s` ago and not before `checked_after`."""
        if table not in schema.TABLES:
            raise InvalidInput(f"unknown table {table!r}; tables: {', '.join(schema.TABLES)}")
        now = time.monotonic()
        with self._cache_lock:
            hit = self._cache.get(table)
            if hit and (self.tag is not None or (now - hit[0] < self.refresh_s and hit[0] >= checked_after)):
                return hit[1], hit[2]
        if self.tag is not None:
            ds = self._at_tag(table)
        elif hit:
            ds = hit[1]
            with store_errors(self.location):  # the first read after an object store went away
                latest = ds.latest_version
                if latest != ds.version:
                    ds = ds.checkout_version(latest)
        else:
            opened: dict[str, lance.LanceDataset] = {}
            if table not in self.location.known_tables and not self.location.is_local:
                # opened with `recall`: the first read of a table this machine has not seen
                # there makes sure of the lake's tables (a new lake has none yet), opening them
                with store_errors(self.location):
                    opened = tables.ensure_tables(self.location)
            ds = opened.get(table) or tables.open_table(self.path, table)
        checked = time.monotonic()
        with self._cache_lock:
            self._cache[table] = (now, ds, checked)
        return ds, checked

    def _at_tag(self, table: str) -> lance.LanceDataset:
        """`table` as of this view's tag. A table added after the tag was taken has no such
        tag; at that time it held nothing, which is its first version (created empty)."""
        try:
            return tables.open_table(self.path, table, version=self.tag)
        except EpisodeLakeError:  # the store's or a setting's (InvalidInput is a ValueError): no missing tag
            raise
        except (ValueError, OSError) as exc:
            if table != "steps" and layout.table_path(self.path, table).exists():
                first = tables.open_table(self.path, table, version=1)
                if first.count_rows() == 0:
                    return first
            raise NotFound(f"table {table!r} has no tag {self.tag!r} ({exc})") from None

    def per_version(self, table: str, what: Callable[[lance.LanceDataset], T]) -> T:
        """`what(dataset)` for the table's latest version, computed once per version: for
        small facts a hot path asks on every call (which sets are live) and that change only
        when the table does. `what` must depend on the dataset alone."""
        ds = self.dataset(table)
        key = (table, what, ds.version)
        with self._cache_lock:
            if key in self._per_version:
                return self._per_version[key]
        value = what(ds)
        with self._cache_lock:  # one version per table and question: older ones are dropped
            for old in [k for k in self._per_version if k[:2] == key[:2]]:
                del self._per_version[old]
            self._per_version[key] = value
        return value

    def datasets(self) -> dict[str, lance.LanceDataset]:
        """Every table at versions that agree: no step without its episode, no member
        without its set. Tables are resolved in `tables.SNAPSHOT_ORDER` (steps before
        episodes; writers commit the other way round), and a table is never served from a
        cache checked before a table resolved ahead of it was checked."""
        out = {}
        checked = float("-inf")
        for table in tables.SNAPSHOT_ORDER:
            out[table], ended = self._resolve(table, checked_after=checked)
            checked = max(checked, ended)
        return {t: out[t] for t in schema.TABLES}

    def invalidate(self, table: str | None = None) -> None:
        with self._cache_lock:
            if table is None:
                self._cache.clear()
            else:
                self._cache.pop(table, None)

    # -- SQL ---------------------------------------------------------------------------
    @property
    def sql_engine(self) -> lake_sql.SqlEngine:
        with self._cache_lock:
            if self._sql is None:
                self._sql = lake_sql.SqlEngine()
            return self._sql

    def sql(self, query: str, params: list | dict | None = None) -> pa.Table:
        """Trusted SQL over every table (see `episodelake.lake.storage.sql`)."""
        return self.sql_engine.run(self.datasets(), query, params)

    def sql_sandboxed(self, query: str, *, max_rows: int = lake_sql.DEFAULT_MAX_ROWS,
                      max_bytes: int | None = None,
                      timeout_s: float = lake_sql.DEFAULT_TIMEOUT_S) -> tuple[pa.Table, bool]:
        """Untrusted SQL: one SELECT, no file access, a row cap (and a byte cap when given)
        and a time limit. Returns (rows, truncated)."""
        return self.sql_engine.run_sandboxed(self.datasets(), query, max_rows=max_rows,
                                             max_bytes=max_bytes, timeout_s=timeout_s)

    def matching(self, select: str, where: str | None, *, flag: str = "--where", also: str = "TRUE",
                 timeout_s: float = lake_sql.DEFAULT_TIMEOUT_S) -> pa.Table:
        """Every row of `select` (a SELECT ... FROM ... of our own, without WHERE) that meets a
        caller's condition `where` and our own `also`, run in the sandbox.

        The one way a condition from a person or a page reaches SQL (`--where` of purge,
        delete, export, datasets, filing and re-runs; the API's `where` fields):
        `lake_sql.condition` checks it is one expression before anything runs, and a
        refusal or a failure is one line starting with `flag`."""
        checked = lake_sql.condition(where, flag)
        try:
            table, _ = self.sql_sandboxed(f"{select} WHERE {checked} AND ({also})", max_rows=2**62,
                                          timeout_s=timeout_s)
        except SqlRefused as exc:
            line = "; ".join(part.strip() for part in str(exc).splitlines() if part.strip())
            raise SqlRefused(f"{flag} {lake_sql.quoted(where or '')}: {line}") from None
        return table

    # -- reading episodes and steps ----------------------------------------------------
    def episode(self, episode_id: str) -> dict:
        layout.check_id(episode_id, "episode_id")
        rows = self.dataset("episodes").to_table(filter=f"episode_id = {sql_string(episode_id)}").to_pylist()
        if not rows:
            raise NotFound(f"episode {episode_id!r} is not in the lake")
        return rows[-1]

    def steps(self, episode_id: str, columns: list[str] | None = None) -> pa.Table:
        """An episode's steps in order, without image bytes."""
        layout.check_id(episode_id, "episode_id")
        cols = columns or schema.columns("steps")
        if any(c in schema.IMAGE_COLUMNS["steps"] for c in cols):
            raise InvalidInput("steps() never returns image bytes; use image() or images()")
        t = self.dataset("steps").to_table(columns=cols, filter=f"episode_id = {sql_string(episode_id)}")
        return t.sort_by("step") if "step" in cols else t

    def episode_batch(self, episode_ids: Sequence[str], *,
                      images: bool = False) -> tuple[pa.Table, pa.Table]:
        """(episodes, steps) rows of these episodes, steps with screenshot bytes in `image`
        when asked (null where one was lost). The filter is pushed into Lance, so the cost
        follows the batch, not the lake: a trainer that registered whole tables and filtered
        in SQL read every stored screenshot each iteration, slower as the lake grew."""
        for episode_id in episode_ids:
            layout.check_id(episode_id, "episode_id")
        if not episode_ids:
            raise InvalidInput("episode_ids: give at least one episode")
        where = sql_in("episode_id", episode_ids)
        episodes = self.dataset("episodes").to_table(filter=where)
        ds = self.dataset("steps")
        columns = [c for c in schema.columns("steps") if c not in schema.IMAGE_COLUMNS["steps"]]
        steps = ds.to_table(columns=columns, filter=where, with_row_id=True)
        if images:
            blobs = ds.take_blobs("image", ids=steps["_rowid"].to_pylist())
            steps = steps.append_column("image", pa.array(
                [None if blob is None else blob.read() for blob in blobs], pa.large_binary()))
        return episodes, steps.drop_columns(["_rowid"])

    def _step_rowid(self, episode_id: str, step: int) -> int:
        layout.check_id(episode_id, "episode_id")
        if not isinstance(step, int) or step < 0:
            raise InvalidInput(f"step must be a non-negative integer, not {step!r}")
        hit = self.dataset("steps").to_table(
            columns=["step"], with_row_id=True,
            filter=f"episode_id = {sql_string(episode_id)} AND step = {int(step)}",
        )
        if hit.num_rows == 0:
            raise NotFound(f"episode {episode_id!r} has no step {step}")
        return hit["_rowid"][0].as_py()

    def image(self, episode_id: str, step: int) -> tuple[bytes, str]:
        """One step's screenshot as stored, with its format (png | jpeg | webp).

        Found through the `episode_id` index (built by `optimize`) and read as one blob,
        without scanning the table.
        """
        rowid = self._step_rowid(episode_id, step)
        ds = self.dataset("steps")
        blob = ds.take_blobs("image", ids=[rowid])[0]
        if blob is None:  # an imported step whose screenshot was lost
            raise NotFound(f"episode {episode_id!r} step {step} has no screenshot")
        data = blob.read()
        fmt = sniff_format(data)
        if fmt is None:  # the writer stores PNG, JPEG and WebP only
            raise LakeCorrupt(f"episode {episode_id!r} step {step}: the stored screenshot is not "
                              "a PNG, JPEG or WebP image")
        return data, fmt

    def images(self, episode_id: str) -> Iterator[tuple[int, bytes]]:
        """An episode's screenshots in step order, as (step, bytes); steps whose screenshot
        was lost (flagged at import) are left out."""
        layout.check_id(episode_id, "episode_id")
        ds = self.dataset("steps")
        hits = ds.to_table(columns=["step"], with_row_id=True,
                           filter=f"episode_id = {sql_string(episode_id)}").sort_by("step")
        if hits.num_rows == 0:
            return
        blobs = ds.take_blobs("image", ids=hits["_rowid"].to_pylist())
        for step, blob in zip(hits["step"].to_pylist(), blobs, strict=True):
            if blob is not None:
                yield step, blob.read()

    # -- writing -----------------------------------------------------------------------
    def writer(self, options: WriterOptions | None = None) -> LakeWriter:
        self.check_writable()
        return LakeWriter(self.location, options)

    def upsert(self, table: str, rows: list[dict], *, audited: Audited | None = None,
               refers: Refers | None = None) -> dict | None:
        """Write small rows (curation, bookkeeping), replacing rows of the same key; durable
        when it returns. Calls from many threads at once share commits (`group_commit`).

        `audited`, when given, makes the audit entries of the change: it is called with the
        rows these keys held when read just before the commit (None for a new key; in `rows`'
        order; a commit of another process in between is not seen)
        and returns `audit.entry` rows, committed to `audit` in the same round right after
        the rows. `refers` names a row the write needs (see `Refers`), returned. Both are
        read once for the whole round, not once per caller, so twenty curators saving at
        once cost one lookup each."""
        return self._write(table, rows, "upsert", audited, refers)

    def insert(self, table: str, rows: list[dict], *, audited: Audited | None = None) -> None:
        """Append rows whose keys are new (log rows: audit, lineage), without the key lookup
        an upsert makes; durable when it returns, commits shared as `upsert`'s (and
        `audited` as there, called with no rows before)."""
        self._write(table, rows, "append", audited)

    def _write(self, table: str, rows: list[dict], kind: str, audited: Audited | None,
               refers: Refers | None = None) -> dict | None:
        self.check_writable()
        write = _Write(schema.conform(table, rows), audited, refers)
        try:
            return self.group_commit.submit((table, kind), write,
                                            lambda batch: self._commit_round(table, kind, batch))
        finally:
            for name in [table, "audit"] if audited else [table]:
                self.invalidate(name)
                for listener in self.write_listeners:
                    listener(name)

    def _commit_round(self, table: str, kind: str, batch: Sequence[_Write]) -> list[dict | NotFound | None]:
        """One group-commit round: the rows its writes refer to (one scan per table), its
        rows as one version, then its audit entries as one."""
        outcomes = self._referred(batch)
        batch = [w for w, out in zip(batch, outcomes, strict=True) if not isinstance(out, NotFound)]
        if not batch:
            return outcomes
        rows = batch[0].rows if len(batch) == 1 else pa.concat_tables([w.rows for w in batch])
        audited = any(w.audited for w in batch)
        names = schema.KEYS[table]
        before = {} if not audited or kind == "append" else tables.stored_rows(
            self.path, table, [tuple(r[n] for n in names) for r in rows.select(list(names)).to_pylist()])
        tables.commit(self.path, table, rows, kind)
        if not audited:
            return outcomes
        entries = []
        for write in batch:  # a key written twice in the round: the second's "before" is the first
            written = write.rows.to_pylist()
            keys = [tuple(r[n] for n in names) for r in written]
            if write.audited:
                entries += write.audited([before.get(k) for k in keys])
            before.update(zip(keys, written, strict=True))
        if entries:
            tables.commit(self.path, "audit", schema.conform("audit", entries), "append")
        return outcomes

    def _referred(self, batch: Sequence[_Write]) -> list[dict | NotFound | None]:
        """Each write's referred row, NotFound where it is missing, None where it names none."""
        wanted: dict[tuple[str, tuple[str, ...]], set[str]] = {}
        for w in batch:
            if w.refers:
                wanted.setdefault((w.refers.table, w.refers.columns), set()).add(w.refers.key)
        found: dict[tuple[str, tuple[str, ...]], dict[str, dict]] = {}
        for (table, columns), keys in wanted.items():
            (key,) = schema.KEYS[table]
            read = self.dataset(table).to_table(columns=list(dict.fromkeys((key, *columns))),
                                                filter=sql_in(key, sorted(keys)))
            found[table, columns] = {r[key]: {c: r[c] for c in columns} for r in read.to_pylist()}
        out: list[dict | NotFound | None] = []
        for w in batch:
            ref = w.refers
            row = None if ref is None else found[ref.table, ref.columns].get(ref.key)
            out.append(None if ref is None else row if row is not None else NotFound(ref.missing))
        return out

    def check_writable(self) -> None:
        if self.tag is not None:
            raise InvalidInput(f"this lake view is pinned at tag {self.tag!r} and is read-only")

    # -- versions, tags, maintenance ---------------------------------------------------
    def versions(self) -> dict[str, list[Version]]:
        return {t: self.dataset(t).versions() for t in schema.TABLES}

    def current_versions(self) -> dict[str, int]:
        """The latest version of every table, as one consistent snapshot (see `datasets`)."""
        return {t: ds.version for t, ds in self.datasets().items()}

    def tags(self) -> dict[str, dict[str, int]]:
        """tag -> {table: version}."""
        out: dict[str, dict[str, int]] = {}
        for t in schema.TABLES:
            for name, info in self.dataset(t).tags.list().items():
                out.setdefault(name, {})[t] = info["version"] if isinstance(info, dict) else info.version
        return out

    def create_tag(self, name: str) -> dict[str, int]:
        """Tag the current version of every table with `name` (one lake-wide snapshot)."""
        self.check_writable()
        layout.check_id(name, "tag")
        if name in self.tags():
            raise InvalidInput(f"tag {name!r} exists; pick another name or delete it first")
        self.invalidate()
        pinned = self.current_versions()
        for t, v in pinned.items():
            self.dataset(t).tags.create(name, v)
        return pinned

    def delete_tag(self, name: str) -> None:
        self.check_writable()
        if name not in self.tags():
            raise NotFound(f"no tag {name!r}; `elake tag --list` shows the tags")
        for t in schema.TABLES:
            ds = self.dataset(t)
            if name in ds.tags.list():
                ds.tags.delete(name)

    def at(self, tag: str) -> Lake:
        """A read-only view of the whole lake as of `tag`."""
        if tag not in self.tags():
            raise NotFound(f"no tag {tag!r}; `elake tag --list` shows the tags")
        return Lake(self.path, tag=tag, create=False)

    def optimize(self, *, prune_older_than: timedelta | None = timedelta(days=7)) -> dict:
        """Compact fragments, build missing key indexes and fold the rows written or enriched
        since into every index (full-text and vector ones too), prune old untagged versions."""
        self.check_writable()
        report = {}
        for t in schema.TABLES:
            # each step commits on its own and is retried when live writers commit first
            before, _ = tables.compact(self.path, t)
            tables.index_keys(self.path, t)
            removed = tables.prune(self.path, t, prune_older_than) if prune_older_than is not None else 0
            report[t] = {"fragments_before": before, "fragments_after": tables.fragment_count(self.path, t),
                         "versions_removed": removed}
        self.invalidate()
        return report

    def recover(self, spool_dir: Path | None = None) -> dict:
        """Replay dead writers' spools (this machine's for the lake, or those under
        `spool_dir`, copied from another machine) and check every table reads back.

        Needs free space for one spool segment at a time; with less, raises `StorageFull`
        saying how much (nothing is lost, run it again once there is room)."""
        self.check_writable()
        replay = replay_orphans(self.location, spool_dir)
        problems = {}
        for t in schema.TABLES:
            try:
                tables.open_table(self.path, t).count_rows()
            except (OSError, LakeError) as exc:
                problems[t] = str(exc)
        self.invalidate()
        report = {"rows_replayed": replay.rows, "problems": problems}
        if replay.torn_tails:  # segments whose last write never returned (never acknowledged)
            report["torn_tails"] = replay.torn_tails
        if replay.damaged:  # segments with unreadable bytes mid-file, each line naming the kept copy
            report["damaged"] = replay.damaged
        return report

    def info(self) -> dict:
        out = {}
        for t in schema.TABLES:
            ds = self.dataset(t)
            size = layout.table_path(self.location, t).size()
            out[t] = {"rows": ds.count_rows(), "version": ds.version,
                      "fragments": len(ds.get_fragments()), "bytes": size}
        return out


def dumps(value: object) -> str | None:
    """JSON text for the schema's JSON columns (None stays null)."""
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
