"""SQL over the lake: DuckDB in-process, every table a view over its Lance dataset.

Image bytes are large, so the `steps` view leaves the `image` column out unless the query
names `image`; then the view carries the bytes (Lance reads the blobs only for the rows and
columns DuckDB asks for, thanks to projection and filter pushdown).

The sandbox is for SQL from people and pages we do not trust (the web app's console, the
API's `where` filters). Each refusal says what was refused. Two independent layers keep a
query from changing anything:

1. The statement check allows one SELECT (or WITH ... SELECT, FROM ..., DESCRIBE/SUMMARIZE
   of a query) and EXPLAIN / EXPLAIN ANALYZE of such a SELECT only: EXPLAIN ANALYZE executes
   what it explains, so `EXPLAIN ANALYZE CREATE MACRO upper(a) AS 'x'` would otherwise
   redefine `upper` for every later query. Names that reveal the server's configuration
   (`current_setting`, `duckdb_settings()`, `pg_settings`, secrets, extensions, logs,
   database paths, ...) are refused too: `INTROSPECTION`.
2. Each query runs on its own cursor, inside a READ ONLY transaction that is rolled back
   afterwards, on a database whose external access is disabled and whose configuration is
   locked. So even a statement the check missed cannot create, change or keep anything
   (catalog entries, tables held in memory, settings, attached files): nothing a query does
   outlives it. The cost is about 0.25 ms per query (a BEGIN and a ROLLBACK on the cursor);
   a fresh database per query would cost about 15 ms.

Results stop at a row cap and, where asked, a byte cap (the Arrow size of what is kept),
and the query is interrupted at a time limit.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping

import duckdb
import lance
import pyarrow as pa
import pyarrow.compute as pc

from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import InvalidInput, SqlRefused

DEFAULT_MAX_ROWS = 10_000
DEFAULT_TIMEOUT_S = 10.0

#: Functions and views that reveal the server's configuration, environment or state (paths,
#: secrets, extensions, logs, memory, other connections) or change logging. Matched against
#: every identifier of a query, quoted or not, whatever schema qualifies it.
INTROSPECTION = frozenset({
    "current_setting", "duckdb_settings", "pg_settings", "duckdb_profiling_settings",
    "duckdb_secrets", "which_secret", "duckdb_secret_types", "duckdb_secret_type_parameters",
    "duckdb_extensions", "duckdb_extension_repositories", "duckdb_grammar_extensions",
    "duckdb_databases", "pragma_database_list", "pragma_database_size", "pg_database",
    "duckdb_approx_database_count", "pragma_user_agent", "pragma_platform", "pragma_version",
    "pragma_metadata_info", "pragma_storage_info", "pragma_show", "duckdb_memory",
    "duckdb_temporary_files", "duckdb_external_file_cache", "duckdb_external_resources",
    "duckdb_external_resource_types", "duckdb_eviction_queues", "duckdb_connection_count",
    "duckdb_live_query_metrics", "duckdb_prepared_statements", "pg_prepared_statements",
    "duckdb_variables", "getvariable", "getenv", "duckdb_logs", "duckdb_logs_parsed",
    "duckdb_log_contexts", "parse_duckdb_log_message", "write_log", "enable_logging",
    "disable_logging", "truncate_duckdb_logs", "pg_tablespace", "database_list", "database_size",
    "show_databases", "metadata_info", "storage_info", "platform", "user_agent",
    "extension_versions", "duckdb_available_metrics", "enable_profiling", "disable_profiling",
    "enable_profile", "disable_profile", "add_grammar_extension", "remove_grammar_extension",
    "create_external_resource", "register_external_resource", "register_external_resource_type",
    "deregister_external_resource", "destroy_external_resource", "copy_database", "import_database",
})
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
_NAMES_IMAGE = re.compile(r"\b(" + "|".join(c for cs in schema.IMAGE_COLUMNS.values() for c in cs) + r")\b",
                          re.IGNORECASE)


def sql_string(value: str) -> str:
    """`value` as an SQL string literal, for filters that must be text: Lance's `filter=`
    takes no parameters. DuckDB and Lance's DataFusion both read standard SQL literals, where
    only the quote is doubled and a backslash or NUL is an ordinary character."""
    if not isinstance(value, str):
        raise InvalidInput(f"an SQL string literal needs a str, not {type(value).__name__} ({value!r})")
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """`column IN ('a', 'b', ...)` over string literals; over no values it is `false` (an
    empty `IN ()` is a syntax error to Lance)."""
    literals = [sql_string(v) for v in values]
    return f"{column} IN ({', '.join(literals)})" if literals else "false"


class _ImageBytes(lance.LanceDataset):
    """A steps dataset whose blob column scans as plain bytes, so DuckDB can select it.

    A condition on an image column (`WHERE image IS NULL`) cannot be pushed into Lance's
    scan: Lance filters before it reads blobs and does not know the column there. Such a
    condition is applied to the scanned batches instead (`_FilteredScan`)."""

    def scanner(self, *args, **kwargs):
        kwargs.setdefault("blob_handling", "all_binary")
        condition = kwargs.get("filter")
        if condition is None or isinstance(condition, str) or not _NAMES_IMAGE.search(str(condition)):
            return super().scanner(*args, **kwargs)
        kwargs.pop("filter")
        wanted = kwargs.pop("columns", None)  # every column is scanned: the condition may name any
        return _FilteredScan(super().scanner(*args, **kwargs), condition, wanted)

    @property
    def schema(self) -> pa.Schema:
        base = super().schema
        for name in schema.IMAGE_COLUMNS["steps"]:
            base = base.set(base.get_field_index(name), pa.field(name, pa.large_binary()))
        return base


class _FilteredScan:
    """A Lance scan with a condition applied to its batches, then the columns asked for kept:
    what DuckDB reads (`to_reader`) from a dataset's scanner."""

    def __init__(self, scanner: lance.LanceScanner, condition: pc.Expression, columns: list[str] | None):
        self._scanner, self._condition, self._columns = scanner, condition, columns

    def to_reader(self) -> pa.RecordBatchReader:
        reader = self._scanner.to_reader()
        keep = self._columns
        out_schema = reader.schema if keep is None else pa.schema([reader.schema.field(c) for c in keep])

        def batches():
            for batch in reader:
                kept = pa.Table.from_batches([batch]).filter(self._condition)
                yield from (kept if keep is None else kept.select(keep)).to_batches()

        return pa.RecordBatchReader.from_batches(out_schema, batches())


def _identifiers(query: str) -> list[str]:
    """Every identifier in `query`, unquoted and lower-cased (DuckDB's own tokenizer)."""
    tokens = duckdb.tokenize(query)
    out = []
    for i, (start, kind) in enumerate(tokens):
        if kind != duckdb.token_type.identifier:
            continue
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(query)
        text = query[start:end].strip()
        if text.startswith('"'):
            text = text[1:text.rfind('"')].replace('""', '"') if text.count('"') > 1 else text[1:]
        out.append(text.lower())
    return out


def _tables_named(datasets: Mapping[str, lance.LanceDataset], query: str) -> list[str]:
    return [t for t in datasets if re.search(rf"\b{t}\b", query, re.IGNORECASE)]


def register_views(
    con: duckdb.DuckDBPyConnection, datasets: Mapping[str, lance.LanceDataset], query: str
) -> None:
    """Register each table the query names as a view; image columns only if the query names one."""
    wants_images = bool(_NAMES_IMAGE.search(query))
    for table in _tables_named(datasets, query):
        ds = datasets[table]
        image_cols = schema.IMAGE_COLUMNS.get(table, ())
        secret_cols = schema.SECRET_COLUMNS.get(table, ())
        if not image_cols and not secret_cols:
            con.register(table, ds)
        elif image_cols and wants_images:
            con.register(table, _ImageBytes(ds.uri, version=ds.version))
        else:
            con.register(f"__{table}_all", ds)
            cols = ", ".join(f'"{c}"' for c in schema.columns(table) if c not in secret_cols)
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
        for setting in ("autoinstall_known_extensions = false", "autoload_known_extensions = false",
                        "allow_persistent_secrets = false", "allow_community_extensions = false",
                        "enable_external_access = false", "lock_configuration = true"):
            self._sandbox.execute(f"SET {setting}")

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
                      max_rows: int = DEFAULT_MAX_ROWS, max_bytes: int | None = None,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[pa.Table, bool]:
        """Untrusted SQL. Returns (rows, truncated): at most `max_rows` rows and, when
        `max_bytes` is given, at most that many bytes of Arrow data (a row that would pass
        the cap is left out, so a result may be empty and truncated)."""
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
            con.execute("BEGIN TRANSACTION READ ONLY")
            timer.start()
            try:
                reader = con.sql(query).to_arrow_reader(batch_size=min(max_rows + 1, 8192))
                batches, truncated = _take(reader, max_rows, max_bytes)
                reader.close()
            except duckdb.InterruptException:
                raise SqlRefused(limit) from None
            except duckdb.PermissionException as exc:
                raise SqlRefused(f"the sandbox cannot read or write files or other databases ({exc})") from None
            except duckdb.TransactionException as exc:
                raise SqlRefused(f"the sandbox is read-only ({exc})") from None
            except duckdb.Error as exc:
                raise SqlRefused(limit if timed_out.is_set() else f"query failed: {exc}") from None
            if timed_out.is_set():
                raise SqlRefused(limit)
            return pa.Table.from_batches(batches, schema=reader.schema), truncated
        finally:
            timer.cancel()
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:
                pass  # no transaction open (it failed to start): nothing to undo
            con.close()


def _take(reader: pa.RecordBatchReader, max_rows: int, max_bytes: int | None) -> tuple[list, bool]:
    """Batches from `reader` up to the caps, and whether a cap cut the result."""
    batches: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in reader:
        keep = min(batch.num_rows, max_rows - rows)
        if max_bytes is not None:
            keep = _rows_within(batch, keep, max_bytes - size)
        if keep:
            part = batch.slice(0, keep)
            batches.append(part)
            rows += keep
            size += part.nbytes
        if keep < batch.num_rows:
            return batches, True
    return batches, False


def _rows_within(batch: pa.RecordBatch, rows: int, budget: int) -> int:
    """The most leading rows of `batch` (at most `rows`) whose Arrow data fits in `budget`."""
    if rows == 0 or batch.slice(0, rows).nbytes <= budget:
        return rows
    low, high = 0, rows  # fits(low), not fits(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if batch.slice(0, mid).nbytes <= budget else (low, mid)
    return low


def check_statement(query: str) -> None:
    """Refuse anything but one read-only query, naming what was refused."""
    stmt = _one_statement(query)
    if stmt.type == duckdb.StatementType.EXPLAIN:
        _check_explained(query)
    elif stmt.type != duckdb.StatementType.SELECT:
        raise SqlRefused(_refusal(query, stmt.type))
    try:
        names = set(_identifiers(query))
    except duckdb.Error as exc:
        raise SqlRefused(f"SQL does not parse: {exc}") from None
    revealing = sorted(names & INTROSPECTION)
    if revealing:
        raise SqlRefused(f"{', '.join(revealing)} is not allowed: the sandbox does not show the "
                         "server's configuration or state; query the lake's tables")


#: Table functions that read files or other databases, or run SQL given as text. A condition
#: never needs them; the sandbox's disabled external access refuses the file readers too, so
#: naming them here makes the refusal say what was refused before anything runs.
OUTSIDE = frozenset({
    "read_csv", "read_csv_auto", "read_single_csv_file", "sniff_csv", "read_parquet", "parquet_scan",
    "read_single_parquet_file", "parquet_metadata", "parquet_file_metadata", "parquet_full_metadata",
    "parquet_kv_metadata", "parquet_schema", "parquet_page_index", "parquet_bloom_probe", "read_json",
    "read_json_auto", "read_json_objects", "read_json_objects_auto", "read_ndjson", "read_ndjson_auto",
    "read_ndjson_objects", "read_single_json_file", "read_text", "read_blob", "read_duckdb", "glob",
    "query", "query_table", "json_execute_serialized_sql", "arrow_scan", "arrow_scan_dumb",
    "python_arrow_scan", "pandas_scan", "python_map_function", "checkpoint", "force_checkpoint",
    "iceberg_scan", "delta_scan", "sqlite_scan", "postgres_scan", "mysql_scan",
})


def condition(where: str | None, flag: str = "--where") -> str:
    """A caller's condition (`--where`, an API field) checked to be one SQL expression, and
    returned in parentheses, on lines of its own, ready to splice after `WHERE` or `AND`.

    Every condition that comes from a person or a page goes through here before anything
    runs, and then runs in the sandbox (`Lake.matching`): DuckDB's own expression parser
    refuses a second statement, a modifier (`ORDER BY`, `LIMIT`), a list of expressions,
    unbalanced quotes and comments, and a closing parenthesis that would escape the
    enclosing one (`1=1) OR (1=1`); names that read files or reveal the server (`OUTSIDE`,
    `INTROSPECTION`) and a string used as a table (`FROM 'x.csv'`) are refused by name.
    Each refusal is one line that starts with `flag` and the condition as given."""
    if where is None or not str(where).strip():
        raise SqlRefused(f"{flag}: give a SQL condition, e.g. \"run_id = 'r1'\"")
    named = f"{flag} {quoted(where)}"
    if "\x00" in where:
        raise SqlRefused(f"{named}: the condition holds a NUL character")
    try:
        if re.fullmatch(r"(.*\.)?\*", str(duckdb.SQLExpression(where)).strip(), re.DOTALL):
            raise duckdb.ParserException("a star names columns, not a condition")
        if len(duckdb.extract_statements(f"SELECT 1 WHERE (\n{where}\n)")) != 1:
            raise duckdb.ParserException("it does not read as one condition after WHERE")
        names = set(_identifiers(where)) | _called_keywords(where)
    except duckdb.Error as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise SqlRefused(f"{named}: not one SQL condition ({first[:200]})") from None
    outside = sorted(names & (OUTSIDE | INTROSPECTION))
    if outside:
        raise SqlRefused(f"{named}: {', '.join(outside)} is not allowed in a condition: it reads files "
                         "or shows the server; a condition reads the lake's tables only")
    if _string_as_table(where):
        raise SqlRefused(f"{named}: a string used as a table reads a file; a condition reads the lake's "
                         "tables only")
    return f"(\n{where}\n)"


def quoted(text: str, width: int = 80) -> str:
    """`text` quoted on one line for an error message, cut at `width` characters."""
    return repr(text if len(text) <= width else text[:width] + "...")


def _called_keywords(query: str) -> set[str]:
    """Keywords called as functions (`glob('/*')`: GLOB is also an operator), lower-cased."""
    tokens = [t for t in duckdb.tokenize(query) if t[1] != duckdb.token_type.comment]
    out = set()
    for (start, kind), (after, _) in zip(tokens, tokens[1:], strict=False):
        if kind == duckdb.token_type.keyword and query[after] == "(":
            out.add(query[start:after].strip().lower())
    return out


def _string_as_table(query: str) -> bool:
    """Whether a string literal follows FROM or JOIN (`FROM 'leak.csv'` reads that file)."""
    tokens = [t for t in duckdb.tokenize(query) if t[1] != duckdb.token_type.comment]
    for (start, kind), (_, next_kind) in zip(tokens, tokens[1:], strict=False):
        word = query[start:start + 4].lower()
        if kind == duckdb.token_type.keyword and word in ("from", "join") \
                and next_kind == duckdb.token_type.string_const:
            return True
    return False


def _one_statement(query: str):
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise SqlRefused(f"SQL does not parse: {exc}") from None
    if len(statements) != 1:
        raise SqlRefused(f"send exactly one statement (got {len(statements)})")
    return statements[0]


def _refusal(query: str, kind: duckdb.StatementType) -> str:
    if kind == duckdb.StatementType.MULTI and re.search(r"\bpivot\b", query, re.IGNORECASE):
        # DuckDB runs a PIVOT whose ON values are not listed as two statements (one finds
        # the values); with the values listed it is one SELECT, which the sandbox runs
        return ("PIVOT needs its ON values listed in the sandbox (without them DuckDB runs a "
                "second statement to find them): e.g. PIVOT episodes ON success IN (true, false) "
                "USING count(*) GROUP BY task_name")
    tokens = [t for t in duckdb.tokenize(query) if t[1] != duckdb.token_type.comment]
    word = query[tokens[0][0]:].split(None, 1)[0].lower() if tokens else ""
    return _REFUSED_WORDS.get(word, f"{kind.name} statements are not allowed: the sandbox runs SELECT only")


def _check_explained(query: str) -> None:
    """EXPLAIN [ANALYZE] is allowed of a SELECT only (EXPLAIN ANALYZE runs its statement).

    The explained statement is what follows EXPLAIN, ANALYZE and an option list `( ... )`.
    A parenthesis after EXPLAIN may also open a subquery, so both readings are checked and
    every one that parses must be a SELECT; if none parses, the query is refused.
    """
    tokens = [t for t in duckdb.tokenize(query) if t[1] != duckdb.token_type.comment]
    words = [query[start:].split(None, 1)[0].lower() for start, _ in tokens]
    i = 1  # tokens[0] is EXPLAIN
    if i < len(tokens) and words[i].startswith(("analyze", "analyse")):
        i += 1
    starts = [tokens[i][0]] if i < len(tokens) else []
    if i < len(tokens) and query[tokens[i][0]] == "(":
        depth, j = 0, i
        for j in range(i, len(tokens)):
            char = query[tokens[j][0]]
            depth += char == "("
            depth -= char == ")"
            if depth == 0:
                break
        if j + 1 < len(tokens):
            starts.append(tokens[j + 1][0])
    readings = []
    for start in starts:
        try:
            statements = duckdb.extract_statements(query[start:])
        except duckdb.Error:
            continue
        if len(statements) == 1:
            readings.append(statements[0].type)
    if not readings:
        raise SqlRefused("EXPLAIN is allowed of one SELECT only")
    for kind in readings:
        if kind != duckdb.StatementType.SELECT:
            raise SqlRefused(f"EXPLAIN of {kind.name} is not allowed: EXPLAIN ANALYZE runs the statement "
                             "it explains, and the sandbox runs SELECT only")
