"""Changing some columns of rows already stored, found by their key.

The writer only appends steps; jobs later fill columns of stored rows (the step-reward judge
fills ``step_reward`` and ``step_reward_reason``, enrichment fills OCR text and thumbnails).
`update_columns` does that with Lance's data evolution instead of rewriting rows: each
fragment holding a matched row gets new data files for the changed columns only (a Lance
``Update`` commit in ``rewrite_columns`` mode), so every other column, image blobs first,
stays in the files it was written to and row ids are kept. A key that is not stored is
simply reported as not updated. The commit is retried on conflicts with concurrent writers
(a compaction that rewrote a fragment meanwhile, another update of the same fragment) like
every other commit (`tables.retry_commit`), each try planned again from the latest version;
an object store that cannot be reached is `StoreUnavailable`, as for every other write.

Indexes over a changed column no longer cover the fragments changed (Lance drops them from
the index, and a search reads them by a flat scan) until the index is optimised again.
"""

from __future__ import annotations

import lance
import pyarrow as pa
import pyarrow.compute as pc

from episodelake.lake.storage import schema, tables
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.sql import sql_in
from episodelake.lake.storage.store import store_errors


def update_columns(lake: Lake, table: str, rows: pa.Table | list[dict]) -> int:
    """Set the non-key columns of `rows` on the stored rows with the same keys; returns how
    many stored rows were updated. Image columns cannot be updated (images are immutable)."""
    lake.check_writable()
    if table not in schema.TABLES:
        raise InvalidInput(f"unknown table {table!r}; tables: {', '.join(schema.TABLES)}")
    if isinstance(rows, list):
        names = list(dict.fromkeys(k for row in rows for k in row))
        rows = pa.Table.from_pylist(rows, schema=pa.schema([schema.TABLES[table].field(n)
                                                            for n in _checked(table, names)]))
    names = _checked(table, rows.column_names)
    if rows.num_rows == 0:
        return 0
    target = pa.schema([schema.TABLES[table].field(n) for n in names])
    keys = schema.KEYS[table]
    rows = tables.dedupe_last(rows.select(names).cast(target), keys)
    values = [n for n in names if n not in keys]

    def rewrite() -> int:
        stored = tables.open_table(lake.path, table)  # with an object store's options
        located = _locate(stored, rows, keys)
        if located.num_rows == 0:
            return 0
        fragments: list[lance.FragmentMetadata] = []
        offsets: dict[int, bytes] = {}
        modified: set[int] = set()
        fragment_ids = pc.shift_right(located["_rowaddr"], 32)
        for fid in pc.unique(fragment_ids).to_pylist():
            part = located.filter(pc.equal(fragment_ids, fid)).select(["_rowid", *values])
            fragment = stored.get_fragment(fid)
            if fragment is None:  # the address was read from this very version
                raise AssertionError(f"{table}: fragment {fid} vanished from version {stored.version}")
            meta, fields, hit = fragment.update_columns(part, left_on="_rowid", with_offsets=True)
            fragments.append(meta)
            offsets[fid] = hit
            modified.update(fields)
        op = lance.LanceOperation.Update(updated_fragments=fragments, fields_modified=sorted(modified),
                                         update_mode="rewrite_columns", updated_fragment_offsets=offsets)
        lance.LanceDataset.commit(stored, op, read_version=stored.version)
        return located.num_rows

    with store_errors(lake.location):
        updated = tables.retry_commit(f"update {table}", rewrite)
    lake.invalidate(table)
    return updated


def _locate(stored: lance.LanceDataset, rows: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """`rows` whose keys are stored, with the stored row's id and address (the address's
    high 32 bits are the fragment). Only the keys take part in the join (Arrow cannot join
    nested columns along), and the rows are then taken by position."""
    first = keys[0]
    found = stored.to_table(columns=list(keys), with_row_id=True, with_row_address=True,
                            filter=sql_in(first, pc.unique(rows[first]).to_pylist()))
    numbered = rows.select(list(keys)).append_column("__i", pa.array(range(rows.num_rows), pa.int64()))
    joined = numbered.join(found, list(keys), join_type="inner", use_threads=False)
    located = rows.take(joined["__i"])
    return located.append_column("_rowid", joined["_rowid"]).append_column("_rowaddr", joined["_rowaddr"])


def _checked(table: str, names: list[str]) -> list[str]:
    """`names` in schema order after checking: every key present, something to set, no
    unknown or image column."""
    keys = schema.KEYS[table]
    known = schema.TABLES[table].names
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidInput(f"unknown column(s) for table {table!r}: {unknown}")
    missing = [k for k in keys if k not in names]
    if missing:
        raise InvalidInput(f"updating {table!r} needs its key column(s) {missing}")
    images = [n for n in names if n in schema.RECORDED_IMAGE_COLUMNS.get(table, ())]
    if images:
        raise InvalidInput(f"stored images are never rewritten: cannot update {images}")
    if set(names) <= set(keys):
        raise InvalidInput(f"nothing to update: give columns of {table!r} besides its key")
    return [n for n in known if n in names]
