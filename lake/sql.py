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


def _tables_named(datasets: Mapping[str, lance.LanceDataset], query: str) -> list[str]:
    return [t for t in datasets if re.search(rf"\b{t}\b", query, re.IGNORECASE)]


def register_views(
    con: duckdb.DuckDBPyConnection, datasets: Mapping[str, lance.LanceDataset], query: str
) -> None:
    """Register each table the query names as a view; images only if the query names one."""
    wants_images = bool(_NAMES_IMAGE.search(query))
    for table in _tables_named(datasets, query):
        ds = datasets[table]
        image_cols = schema.IMAGE_COLUMNS.get(table, ())
        if not image_cols:
            con.register(table, ds)
        elif wants_images:
            con.register(table, _ImageBytes(ds.uri, version=ds.version))
        else:
            con.register(f"__{table}_all", ds)
            cols = ", ".join(f'"{c}"' for c in schema.columns(table))
            con.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT {cols} FROM __{table}_all")


class SqlEngine:
    """Two in-process DuckDB databases: one trusted, one locked down for untrusted SQL.

    Opening a DuckDB database costs tens of milliseconds; a cursor on an open one costs
    microseconds, so each query gets a fresh cursor (its own connection and views, safe
    across threads) on a database opened once. The sandbox database has external access
    disabled and its configuration locked at creation, and it can never be unlocked.
    """

    def __init__(self, threads: int = 2):
        self._trusted = duckdb.connect(config={"threads": threads})
        self._sandbox = duckdb.connect(config={"threads": threads})
        self._sandbox.execute("SET enable_external_access = false")
        self._sandbox.execute("SET lock_configuration = true")

    def run(self, datasets: Mapping[str, lance.LanceDataset], query: str,
            params: list | dict | None = None) -> pa.Table:
        """Trusted SQL (our own code, the lake owner's CLI) as an Arrow table."""
        con = self._trusted.cursor()
        try:
            register_views(con, datasets, query)
            return con.sql(query, params=params).to_arrow_table()
        finally:
            con.close()

    def run_sandboxed(self, datasets: Mapping[str, lance.LanceDataset], query: str, *,
                      max_rows: int = DEFAULT_MAX_ROWS,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[pa.Table, bool]:
        """Untrusted SQL. Returns (rows, truncated): at most `max_rows` rows."""
        check_statement(query)
        con = self._sandbox.cursor()
        timed_out = threading.Event()

        def interrupt():
            timed_out.set()
            con.interrupt()

        timer = threading.Timer(timeout_s, interrupt)
        limit = f"query stopped at the time limit of {timeout_s:g} s"
        try:
            register_views(con, datasets, query)
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
                raise SqlRefused(limit) from None
            except duckdb.PermissionException as exc:
                raise SqlRefused(f"the sandbox cannot read or write files or other databases ({exc})") from None
            except duckdb.Error as exc:
                raise SqlRefused(limit if timed_out.is_set() else f"query failed: {exc}") from None
            if timed_out.is_set():
                raise SqlRefused(limit)
            table = pa.Table.from_batches(batches, schema=reader.schema)
            return table.slice(0, max_rows), table.num_rows > max_rows
        finally:
            timer.cancel()
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
