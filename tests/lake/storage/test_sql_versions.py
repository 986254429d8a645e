"""SQL views, the sandbox's refusals, tags and time travel, maintenance."""

from __future__ import annotations

import pytest

from episodelake.lake import Lake, SqlRefused
from episodelake.lake.storage.errors import InvalidInput, NotFound
from tests.factories import screenshot


@pytest.fixture
def filled(lake):
    with lake.writer() as w:
        for e in range(4):
            w.append("episodes", {"episode_id": f"e{e}", "task_name": f"t{e % 2}", "status": "finished",
                                  "success": e % 2 == 0, "policy_version": "p1"})
            for n in range(3):
                w.append("steps", {"episode_id": f"e{e}", "step": n, "image": screenshot(n),
                                   "action_type": "click"})
    return lake


def test_steps_view_leaves_images_out_unless_named(filled):
    star = filled.sql("select * from steps limit 1")
    assert "image" not in star.column_names and "image_sha256" in star.column_names
    named = filled.sql("select episode_id, step, image from steps where episode_id = 'e1' and step = 2")
    assert named.column("image")[0].as_py() == screenshot(2)


def test_sql_joins_and_aggregates(filled):
    rows = filled.sql(
        "select e.task_name, avg(e.success::int) rate, count(*) steps from episodes e "
        "join steps s using (episode_id) group by 1 order by 1"
    ).to_pylist()
    assert rows == [{"task_name": "t0", "rate": 1.0, "steps": 6}, {"task_name": "t1", "rate": 0.0, "steps": 6}]


@pytest.mark.parametrize(("query", "reason"), [
    ("COPY steps TO '/tmp/out.csv'", "COPY is not allowed"),
    ("ATTACH '/tmp/x.duckdb' AS x", "ATTACH is not allowed"),
    ("INSTALL httpfs", "INSTALL is not allowed"),
    ("LOAD httpfs", "LOAD is not allowed"),
    ("SET threads = 1", "SET is not allowed"),
    ("select * from read_csv('/etc/passwd')", "cannot read or write files"),
    ("select * from read_parquet('/tmp/*.parquet')", "cannot read or write files"),
    ("CREATE TABLE x AS SELECT 1", "CREATE is not allowed"),
    ("DELETE FROM episodes", "DELETE is not allowed"),
    ("select 1; select 2", "exactly one statement"),
    ("select from where", "does not parse"),
])
def test_sandbox_refusals_name_the_reason(filled, query, reason):
    with pytest.raises(SqlRefused, match=reason):
        filled.sql_sandboxed(query)


def test_sandbox_row_cap_and_time_limit(filled):
    rows, truncated = filled.sql_sandboxed("select * from steps", max_rows=5)
    assert rows.num_rows == 5 and truncated
    rows, truncated = filled.sql_sandboxed("select * from steps", max_rows=50)
    assert rows.num_rows == 12 and not truncated
    with pytest.raises(SqlRefused, match="time limit"):
        filled.sql_sandboxed("select count(*) from range(100000000000) a", timeout_s=0.5)


def test_tags_pin_a_lake_wide_snapshot(filled):
    filled.create_tag("before")
    with filled.writer() as w:
        w.append("steps", {"episode_id": "e9", "step": 0, "image": screenshot(9), "action_type": "wait"})
    assert filled.sql("select count(*) from steps").column(0)[0].as_py() == 13
    old = filled.at("before")
    assert old.sql("select count(*) from steps").column(0)[0].as_py() == 12
    with pytest.raises(InvalidInput, match="read-only"):
        old.upsert("sets", [{"set_id": "s"}])
    with pytest.raises(InvalidInput, match="exists"):
        filled.create_tag("before")


def test_optimize_compacts_and_keeps_tagged_versions(filled):
    filled.create_tag("keep")
    for k in range(5):
        filled.upsert("sets", [{"set_id": f"s{k}", "name": f"set {k}", "kind": "failure"}])
    before = filled.info()["sets"]["fragments"]
    report = filled.optimize(prune_older_than=__import__("datetime").timedelta(seconds=0))
    assert before >= 5 and report["sets"]["fragments_after"] == 1
    assert filled.at("keep").sql("select count(*) from steps").column(0)[0].as_py() == 12
    assert filled.sql("select count(*) from sets").column(0)[0].as_py() == 5
    assert filled.image("e2", 1)[0] == screenshot(1)  # found through the index after compaction


def test_recover_on_a_clean_lake_reports_nothing(filled):
    assert filled.recover() == {"rows_replayed": 0, "problems": {}}


def test_reopening_an_absent_lake_is_a_clear_error(tmp_path):
    with pytest.raises(NotFound, match="no lake at"):
        Lake(tmp_path / "nothing", create=False)


def test_a_lake_from_an_older_release_gains_the_tables_added_since(filled, tmp_path):
    """A table added in a later release (jobs) is missing from older lakes and absent from
    their tags: readers see it empty instead of failing, and old tags still read."""
    import shutil

    filled.create_tag("old")
    shutil.rmtree(filled.path / "jobs.lance")  # as a lake written before the jobs table
    reader = Lake(filled.path, create=False)
    assert reader.sql("select count(*) n from jobs").to_pylist() == [{"n": 0}]
    assert reader.sql("select count(*) n from steps").to_pylist() == [{"n": 12}]
    old = reader.at("old")
    assert old.sql("select count(*) n from jobs").to_pylist() == [{"n": 0}]
    assert old.sql("select count(*) n from episodes").to_pylist() == [{"n": 4}]


def test_deleting_a_tag_that_does_not_exist_says_so(filled):
    from episodelake.lake import NotFound

    with pytest.raises(NotFound, match="no tag 'nope'"):
        filled.delete_tag("nope")
