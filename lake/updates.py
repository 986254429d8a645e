"""Changing some columns of rows already stored, found by their key.

The writer only appends steps; a few jobs later fill columns of stored rows (the step-reward
judge fills ``step_reward`` and ``step_reward_reason``). `update_columns` does that as one
Lance ``merge_insert`` on the table's key with only the changed columns: Lance rewrites the
matched rows (image blobs included, byte for byte) into new fragments and never inserts, so
a key that is not stored is simply reported as not updated. The commit is retried on
conflicts with concurrent writers like every other commit (`tables.commit`).
"""

from __future__ import annotations

import pyarrow as pa

from episodelake.lake import schema, tables
from episodelake.lake.errors import InvalidInput
from episodelake.lake.lake import Lake


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
    rows = tables.dedupe_last(rows.select(names).cast(target), schema.KEYS[table])
    keys = list(schema.KEYS[table])

    def merge() -> dict:
        stored = tables.open_table(lake.path, table)  # with an object store's options
        return stored.merge_insert(keys).when_matched_update_all().execute(rows)

    stats = tables.retry_commit(f"update {table}", merge)
    lake.invalidate(table)
    return int(stats["num_updated_rows"])


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
    images = [n for n in names if n in schema.IMAGE_COLUMNS.get(table, ())]
    if images:
        raise InvalidInput(f"stored images are never rewritten: cannot update {images}")
    if set(names) <= set(keys):
        raise InvalidInput(f"nothing to update: give columns of {table!r} besides its key")
    return [n for n in known if n in names]
