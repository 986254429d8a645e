"""String literals built for filters that must be text (Lance's `filter=`): whatever the
value holds, DuckDB and Lance read back exactly that value and nothing else."""

from __future__ import annotations

import duckdb
import lance
import pyarrow as pa
import pytest

from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.sql import sql_in, sql_string

HOSTILE = [
    "a'b", "''", "'", "\\", "\\'", "x\\' OR 1=1 --", "x' OR '1'='1", "'); DROP TABLE t; --",
    "new\nline", "tab\t", "a\0b", '"dq"', "%_*", "$$x$$", "é中\U0001F600", "",
]


def test_duckdb_reads_back_every_hostile_string():
    con = duckdb.connect()
    for value in HOSTILE:
        assert con.execute(f"SELECT {sql_string(value)}").fetchone()[0] == value


@pytest.fixture
def keyed(tmp_path) -> lance.LanceDataset:
    return lance.write_dataset(pa.table({"k": HOSTILE + ["other"]}), tmp_path / "t")


def test_lance_filters_match_exactly_the_hostile_string(keyed):
    for value in HOSTILE:
        hits = keyed.to_table(filter=f"k = {sql_string(value)}").column("k").to_pylist()
        assert hits == [value]


def test_in_list_selects_exactly_its_values_in_both_engines(keyed):
    picked = ["a'b", "\\'", "x' OR '1'='1", "a\0b"]
    assert sorted(keyed.to_table(filter=sql_in("k", picked)).column("k").to_pylist()) == sorted(picked)
    con = duckdb.connect()
    con.register("t", keyed.to_table())
    got = [r[0] for r in con.execute(f"SELECT k FROM t WHERE {sql_in('k', picked)}").fetchall()]
    assert sorted(got) == sorted(picked)


def test_in_list_of_nothing_selects_nothing(keyed):
    assert sql_in("k", []) == "false"
    assert keyed.to_table(filter=sql_in("k", [])).num_rows == 0


@pytest.mark.parametrize("value", [1, None, b"a'b"])
def test_a_value_that_is_not_text_is_refused(value):
    with pytest.raises(InvalidInput, match="needs a str"):
        sql_string(value)
