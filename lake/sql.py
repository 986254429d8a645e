"""SQL over the lake: DuckDB in-process, every table a view over its Lance dataset.

Image bytes are large, so the `steps` view leaves the `image` column out unless the query
names `image`; then the view carries the bytes (Lance reads the blobs only for the rows and
columns DuckDB asks for, thanks to projection and filter pushdown).

The sandbox is for SQL from people and pages we do not trust (the web app's console, the
API's `where` filters). It allows one SELECT (or WITH ... SELECT / EXPLAIN) statement, runs it
on a connection with external access disabled and the configuration locked, caps the rows
returned and interrupts the query at a time limit. Each refusal says what was refused.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping

import duckdb
import lance
import pyarrow as pa

from episodelake.lake import schema
from episodelake.lake.errors import SqlRefused

DEFAULT_MAX_ROWS = 10_000
DEFAULT_TIMEOUT_S = 10.0

_ALLOWED = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
_REFUSED_WORDS = {
    "attach": "ATTACH is not allowed: the sandbox reads only this lake's tables",
    "copy": "COPY is not allowed: the sandbox cannot write or read files",
    "install": "INSTALL is not allowed: no extensions in the sandbox",
    "load": "LOAD is not allowed: no extensions in the sandbox",
    "set": "SET is not allowed: the sandbox's settings are fixed",
    "pragma": "PRAGMA is not allowed in the sandbox",
    "export": "EXPORT is not allowed: the sandbox cannot write files",
    "import": "IMPORT is not allowed: the sandbox cannot read files",
    "create": "CREATE is not allowed: the sandbox is read-only",
    "insert": "INSERT is not allowed: the sandbox is read-only",
    "update": "UPDATE is not allowed: the sandbox is read-only",
    "delete": "DELETE is not allowed: the sandbox is read-only",
    "drop": "DROP is not allowed: the sandbox is read-only",
    "alter": "ALTER is not allowed: the sandbox is read-only",
    "call": "CALL is not allowed in the sandbox",
    "checkpoint": "CHECKPOINT is not allowed in the sandbox",
    "detach": "DETACH is not allowed in the sandbox",
    "use": "USE is not allowed in the sandbox",
    "reset": "RESET is not allowed: the sandbox's settings are fixed",
    "vacuum": "VACUUM is not allowed in the sandbox",
}
_NAMES_IMAGE = re.compile(r"\bimage\b", re.IGNORECASE)


class _ImageBytes(lance.LanceDataset):
    """A steps dataset whose blob column scans as plain bytes, so DuckDB can select it."""

    def scanner(self, *args, **kwargs):
        kwargs.setdefault("blob_handling", "all_binary")
        return super().scanner(*args, **kwargs)

    @property
    def schema(self) -> pa.Schema:
        base = super().schema
        for name in schema.IMAGE_COLUMNS["steps"]:
            base = base.set(base.get_field_index(name), pa.field(name, pa.large_binary()))
        return base


def register_views(
    con: duckdb.DuckDBPyConnection, datasets: Mapping[str, lance.LanceDataset], query: str
) -> None:
    """Register each table as a view; tables with images carry them only if `query` names one."""
    wants_images = bool(_NAMES_IMAGE.search(query))
    for table, ds in datasets.items():
        image_cols = schema.IMAGE_COLUMNS.get(table, ())
        if not image_cols:
            con.register(table, ds)
        elif wants_images:
            con.register(table, _ImageBytes(ds.uri, version=ds.version))
        else:
            con.register(f"__{table}_all", ds)
            cols = ", ".join(f'"{c}"' for c in schema.columns(table))
            con.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT {cols} FROM __{table}_all")


def run(
    datasets: Mapping[str, lance.LanceDataset],
    query: str,
    params: list | dict | None = None,
) -> pa.Table:
    """Run trusted SQL (our own code, the CLI's owner) and return an Arrow table."""
    con = duckdb.connect()
    try:
        register_views(con, datasets, query)
        return con.sql(query, params=params).to_arrow_table()
    finally:
        con.close()


def check_statement(query: str) -> None:
    """Refuse anything but one read-only query, naming what was refused."""
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise SqlRefused(f"SQL does not parse: {exc}") from None
    if len(statements) != 1:
        raise SqlRefused(f"send exactly one statement (got {len(statements)})")
    stmt = statements[0]
    if stmt.type not in _ALLOWED:
        word = query.strip().split(None, 1)[0].lower() if query.strip() else ""
        reason = _REFUSED_WORDS.get(word, f"{stmt.type.name} statements are not allowed: the sandbox runs SELECT only")
        raise SqlRefused(reason)


def run_sandboxed(
    datasets: Mapping[str, lance.LanceDataset],
    query: str,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> tuple[pa.Table, bool]:
    """Run untrusted SQL. Returns (rows, truncated): at most `max_rows` rows."""
    check_statement(query)
    con = duckdb.connect(config={"threads": 2})
    timer = None
    timed_out = threading.Event()
    try:
        register_views(con, datasets, query)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")

        def interrupt():
            timed_out.set()
            con.interrupt()

        timer = threading.Timer(timeout_s, interrupt)
        timer.start()
        try:
            reader = con.sql(query).to_arrow_reader(batch_size=min(max_rows + 1, 8192))
            batches, count = [], 0
            for batch in reader:
                batches.append(batch)
                count += batch.num_rows
                if count > max_rows:
                    break
        except duckdb.InterruptException:
            raise SqlRefused(f"query stopped at the time limit of {timeout_s:g} s") from None
        except duckdb.PermissionException as exc:
            raise SqlRefused(f"the sandbox cannot read or write files or other databases ({exc})") from None
        except duckdb.Error as exc:
            if timed_out.is_set():
                raise SqlRefused(f"query stopped at the time limit of {timeout_s:g} s") from None
            raise SqlRefused(f"query failed: {exc}") from None
        if timed_out.is_set():
            raise SqlRefused(f"query stopped at the time limit of {timeout_s:g} s")
        table = pa.Table.from_batches(batches, schema=reader.schema) if batches else reader.schema.empty_table()
        truncated = table.num_rows > max_rows
        return table.slice(0, max_rows), truncated
    finally:
        if timer is not None:
            timer.cancel()
        con.close()
