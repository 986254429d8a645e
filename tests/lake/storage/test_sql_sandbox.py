"""The SQL sandbox keeps nothing: every statement kind, bare and under EXPLAIN / EXPLAIN
ANALYZE, is refused or leaves no trace; configuration stays hidden; results stop at a byte cap."""

from __future__ import annotations

import re

import duckdb
import pytest

from episodelake.lake import Lake, SqlRefused
from episodelake.lake.storage import sql as lake_sql
from tests.factories import screenshot

#: One of every kind of statement that changes something, or tries to.
WRITES = [
    "CREATE TABLE big AS SELECT range AS r, repeat('x', 100) AS pad FROM range(200000)",
    "CREATE TEMP TABLE tt AS SELECT 1 AS a",
    "CREATE VIEW v AS SELECT 1 AS a",
    "CREATE MACRO upper(a) AS 'pwned'",
    "CREATE OR REPLACE MACRO lower(a) AS 'pwned'",
    "CREATE SEQUENCE seq",
    "CREATE TYPE mood AS ENUM ('sad', 'ok')",
    "CREATE SCHEMA evil",
    "CREATE INDEX i ON episodes (episode_id)",
    "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "INSERT INTO episodes (episode_id) VALUES ('x')",
    "UPDATE episodes SET task_name = 'x'",
    "DELETE FROM episodes",
    "TRUNCATE episodes",
    "MERGE INTO episodes USING (SELECT 1 AS a) ON true WHEN MATCHED THEN DELETE",
    "DROP VIEW episodes",
    "DROP TABLE episodes",
    "ALTER TABLE episodes ADD COLUMN evil INT",
    "ALTER VIEW episodes RENAME TO gone",
    "SET threads = 1",
    "SET GLOBAL memory_limit = '1GB'",
    "RESET threads",
    "SET VARIABLE x = 1",
    "PRAGMA enable_profiling",
    "PRAGMA database_list",
    "ATTACH ':memory:' AS other",
    "DETACH memory",
    "USE system",
    "COPY (SELECT 1) TO '/tmp/elake-sandbox-copy.csv'",
    "EXPORT DATABASE '/tmp/elake-sandbox-export'",
    "IMPORT DATABASE '/tmp/elake-sandbox-export'",
    "CALL pragma_version()",
    "CALL enable_logging()",
    "CHECKPOINT",
    "VACUUM",
    "INSTALL httpfs",
    "LOAD httpfs",
    "PREPARE p AS SELECT 1",
    "EXECUTE p",
    "BEGIN TRANSACTION",
    "COMMIT",
    "COMMENT ON TABLE episodes IS 'x'",
    "PIVOT episodes ON task_name USING count(*)",
]
WRAPPED = [q for w in WRITES for q in (w, f"EXPLAIN {w}", f"EXPLAIN ANALYZE {w}", f"EXPLAIN (ANALYZE) {w}")]


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Lake:
    lake = Lake(tmp_path_factory.mktemp("sandbox") / "lake")
    with lake.writer() as w:
        for e in range(4):
            w.append("episodes", {"episode_id": f"e{e}", "task_name": f"t{e % 2}", "status": "finished",
                                  "success": e % 2 == 0})
            for n in range(2):
                w.append("steps", {"episode_id": f"e{e}", "step": n, "image": screenshot(n),
                                   "action_type": "click"})
    return lake


def fingerprint(lake: Lake) -> dict:
    """What a later query sees of the sandbox: built-in functions and everything in its catalog."""
    row, _ = lake.sql_sandboxed("""
        SELECT upper('x') AS upper, lower('X') AS lower,
               (SELECT count(*) FROM duckdb_tables()) AS tables,
               (SELECT count(*) FROM duckdb_views() WHERE NOT internal) AS views,
               (SELECT count(*) FROM duckdb_sequences()) AS sequences,
               (SELECT count(*) FROM duckdb_types() WHERE NOT internal) AS types,
               (SELECT count(*) FROM duckdb_schemas() WHERE NOT internal) AS schemas,
               (SELECT count(*) FROM duckdb_functions() WHERE function_type = 'macro' AND NOT internal) AS macros,
               (SELECT count(*) FROM duckdb_indexes()) AS indexes,
               (SELECT count(*) FROM episodes) AS episodes,
               (SELECT list(task_name ORDER BY episode_id) FROM episodes) AS tasks""")
    return row.to_pylist()[0]


def test_fingerprint_of_a_clean_sandbox(filled):
    fp = fingerprint(filled)
    assert fp["upper"] == "X" and fp["lower"] == "x" and fp["episodes"] == 4
    assert fp["tables"] == fp["sequences"] == fp["macros"] == fp["indexes"] == 0


@pytest.mark.parametrize("query", WRAPPED)
def test_every_write_is_refused_bare_and_under_explain(filled, query):
    before = fingerprint(filled)
    with pytest.raises(SqlRefused):
        filled.sql_sandboxed(query)
    assert fingerprint(filled) == before


def test_explain_of_a_select_still_works(filled):
    for query in ("EXPLAIN SELECT count(*) FROM episodes", "EXPLAIN ANALYZE SELECT count(*) FROM episodes",
                  "EXPLAIN (FORMAT json) SELECT 1", "EXPLAIN (SELECT 1)",
                  "/* why */ EXPLAIN -- slow?\n ANALYZE WITH x AS (SELECT 1) SELECT * FROM x"):
        rows, _ = filled.sql_sandboxed(query)
        assert rows.num_rows >= 1, query


def test_nothing_outlives_a_query_even_past_the_statement_check(filled, monkeypatch):
    """Second layer: with the statement check switched off, the read-only, rolled-back
    transaction on a fresh cursor still keeps every write from persisting."""
    before = fingerprint(filled)
    monkeypatch.setattr(lake_sql, "check_statement", lambda query: None)
    for query in WRAPPED:
        try:
            filled.sql_sandboxed(query)
        except SqlRefused:
            pass
    monkeypatch.undo()
    assert fingerprint(filled) == before
    rows, _ = filled.sql_sandboxed("SELECT count(*) FROM episodes WHERE upper(task_name) = 'T0'")
    assert rows.column(0)[0].as_py() == 2


def test_sandbox_cost_per_query_stays_small(filled):
    """The isolation (cursor + BEGIN READ ONLY + ROLLBACK) adds well under a millisecond;
    this bounds the whole query generously so a regression to a fresh database (15 ms) on a
    loaded 2-core machine still passes only if the query itself is quick."""
    import time

    for _ in range(5):
        filled.sql_sandboxed("SELECT 1")
    times = []
    for _ in range(30):
        start = time.perf_counter()
        filled.sql_sandboxed("SELECT 1")
        times.append(time.perf_counter() - start)
    assert sorted(times)[15] < 0.05


@pytest.mark.parametrize("query", [
    "SELECT current_setting('secret_directory')",
    "SELECT * FROM duckdb_settings()",
    'SELECT * FROM "DuckDB_Settings"()',
    "SELECT * FROM pg_catalog.pg_settings",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM duckdb_extensions()",
    "SELECT * FROM duckdb_databases()",
    "SELECT * FROM pragma_database_list",
    "SELECT * FROM duckdb_memory()",
    "SELECT * FROM duckdb_logs",
    "SELECT getenv('HOME')",
    "SELECT * FROM pragma_user_agent()",
    "EXPLAIN ANALYZE SELECT current_setting('home_directory')",
    "SELECT 1 FROM episodes WHERE task_name = current_setting('temp_directory')",
])
def test_configuration_is_not_shown(filled, query):
    with pytest.raises(SqlRefused, match="configuration"):
        filled.sql_sandboxed(query)


def test_every_revealing_function_of_this_duckdb_is_refused():
    """A DuckDB upgrade that adds a settings, secrets, logs or paths function fails here
    until INTROSPECTION names it."""
    con = duckdb.connect()
    names = {r[0] for r in con.sql("SELECT function_name FROM duckdb_functions() UNION "
                                   "SELECT view_name FROM duckdb_views() WHERE internal").fetchall()}
    sensitive = re.compile(r"setting|secret|extension|database|memory|temporar|log|env|variable|prepared|"
                           r"user_agent|platform|connection|eviction|profil|metric|external|tablespace|"
                           r"storage_info|metadata_info|pragma_show|pragma_version|file_cache")
    harmless = {"log", "log2", "log10", "geometric_mean", "current_database", "current_catalog",
                "current_connection_id", "has_database_privilege", "has_tablespace_privilege"}
    missing = {n for n in names if sensitive.search(n)} - harmless - lake_sql.INTROSPECTION
    assert not missing, f"refuse these in the sandbox (INTROSPECTION) or list them as harmless: {sorted(missing)}"


def test_strings_and_columns_that_mention_those_names_are_fine(filled):
    rows, _ = filled.sql_sandboxed("SELECT 'current_setting' AS word, task_name FROM episodes LIMIT 1")
    assert rows.column("word")[0].as_py() == "current_setting"


def test_byte_cap_cuts_rows_and_says_so(filled):
    engine, datasets = filled.sql_engine, filled.datasets()
    query = "SELECT repeat('x', 10000) AS a FROM range(10000)"
    rows, truncated = engine.run_sandboxed(datasets, query, max_bytes=1_000_000)
    assert truncated and 0 < rows.num_rows < 100 and rows.nbytes <= 1_000_000
    rows, truncated = engine.run_sandboxed(datasets, query, max_bytes=10)
    assert truncated and rows.num_rows == 0 and rows.column_names == ["a"]
    rows, truncated = engine.run_sandboxed(datasets, "SELECT range FROM range(100)", max_bytes=1_000_000)
    assert not truncated and rows.num_rows == 100


def test_pivot_runs_with_its_values_listed_and_says_how_when_they_are_not(tmp_path):
    from episodelake.lake.storage.sql import SqlEngine

    lake = Lake(tmp_path / "lake")
    lake.upsert("episodes", [{"episode_id": f"e{i}", "task_name": "t", "success": i % 2 == 0} for i in range(5)])
    engine = SqlEngine()
    table, _ = engine.run_sandboxed({"episodes": lake.dataset("episodes")},
                                    "PIVOT episodes ON success IN (true, false) USING count(*) GROUP BY task_name")
    assert table.to_pylist() == [{"task_name": "t", "true": 3, "false": 2}]
    with pytest.raises(SqlRefused, match=r"PIVOT needs its ON values listed .* e\.g\. PIVOT episodes ON"):
        engine.run_sandboxed({"episodes": lake.dataset("episodes")},
                             "PIVOT episodes ON success USING count(*) GROUP BY task_name")
