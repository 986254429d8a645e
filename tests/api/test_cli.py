"""The `elake` command line, run as a user runs it (a subprocess)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from episodelake.api import cli
from episodelake.lake import Lake
from tests.factories import write_reference_episode


def elake(*args, lake=None, check=True):
    cmd = [sys.executable, "-m", "episodelake.api.cli"] + (["--lake", str(lake)] if lake else []) + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_help_lists_every_command():
    out = elake("--help").stdout
    for command in ("info", "sql", "tag", "optimize", "recover", "import", "export", "watch"):
        assert command in out


def test_import_info_sql_tag_export(tmp_path):
    root = tmp_path / "episode"
    for k in range(2):
        write_reference_episode(root, f"task {k}", f"ep-{k}", steps=3)
    lake = tmp_path / "lake"
    out = elake("import", "clawgui", str(root), lake=lake).stdout
    assert "imported 2 episode(s), 6 step(s)" in out
    assert "steps" in elake("info", lake=lake).stdout
    info = json.loads(elake("info", "--json", lake=lake).stdout)
    assert info["tables"]["steps"]["rows"] == 6
    table = elake("sql", "select task_name, count(*) n from episodes group by 1 order by 1", lake=lake).stdout
    assert "task 0" in table and "(2 rows)" in table
    rows = elake("sql", "select episode_id from episodes order by 1", "--format", "json", lake=lake).stdout
    assert [json.loads(r)["episode_id"] for r in rows.splitlines()] == ["ep-0", "ep-1"]
    csv_file = tmp_path / "r.csv"
    elake("sql", "select step from steps order by step", "--format", "csv", "--out", str(csv_file), lake=lake)
    assert csv_file.read_text().splitlines()[0] == "step"
    pq_file = tmp_path / "r.parquet"
    elake("sql", "select * from steps", "--format", "parquet", "--out", str(pq_file), lake=lake)
    assert pq_file.stat().st_size > 0
    typo = elake("sql", "select task_id from episodes", lake=lake, check=False)
    assert typo.returncode == 1 and "Traceback" not in typo.stderr
    assert 'elake sql: query failed' in typo.stderr and '"task_id" not found' in typo.stderr
    assert "tagged v1" in elake("tag", "v1", lake=lake).stdout
    assert "v1:" in elake("tag", "--list", lake=lake).stdout
    assert "(2 rows)" in elake("sql", "select * from episodes", "--at", "v1", lake=lake).stdout
    elake("optimize", lake=lake)
    assert "replayed 0" in elake("recover", lake=lake).stdout
    elake("export", "clawgui", str(tmp_path / "out"), "--where", "task_name = 'task 1'", lake=lake)
    assert (tmp_path / "out" / "task_1" / "ep-1" / "episode.json").exists()


def test_user_errors_are_one_line_without_traceback(tmp_path):
    proc = elake("info", lake=tmp_path / "missing", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "no lake at" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- every error is one line ---------------------------------------------------------------------
#: The installed console script, as a user runs it (next to this interpreter in the venv).
ELAKE = Path(sys.executable).parent / "elake"


def elake_script(*args, lake=None) -> subprocess.CompletedProcess:
    assert ELAKE.is_file(), f"{ELAKE} is missing: install the project (`just setup`)"
    cmd = [str(ELAKE)] + (["--lake", str(lake)] if lake else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def assert_one_line_error(proc: subprocess.CompletedProcess, command: str, *fragments: str) -> None:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"elake {command}: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def small_lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    for k in range(2):
        write_reference_episode(root / "episode", f"task {k}", f"ep-{k}", steps=3)
    elake("import", "clawgui", str(root / "episode"), lake=root / "lake")
    return root / "lake"


def test_csv_quotes_a_header_that_needs_it_and_parses_back(small_lake, tmp_path):
    query = ("select round(avg(step) * 1.25, 2), 'a,b' as \"x,y\", 'say \"hi\"' as \"q\"\"uote\", "
             "'two\nlines' as plain, count(*) as n from steps")
    expected_header = ["round((avg(step) * 1.25), 2)", "x,y", 'q"uote', "plain", "n"]
    expected_row = ["1.25", "a,b", 'say "hi"', "two\nlines", "6"]
    printed = elake_script("sql", query, "--format", "csv", lake=small_lake)
    assert printed.returncode == 0 and "Traceback" not in printed.stderr, printed.stderr
    assert list(csv.reader(io.StringIO(printed.stdout, newline=""))) == [expected_header, expected_row]
    out = tmp_path / "r.csv"
    assert elake_script("sql", query, "--format", "csv", "--out", str(out), lake=small_lake).returncode == 0
    with open(out, newline="", encoding="utf-8") as fh:
        assert list(csv.reader(fh)) == [expected_header, expected_row]


def test_bad_sql_is_one_line(small_lake):
    proc = elake_script("sql", "selec task_name\nfrom episodes", lake=small_lake)
    assert_one_line_error(proc, "sql", "query failed", "syntax error")


def test_a_folder_that_is_not_a_lake_is_one_line(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("buy milk")
    assert_one_line_error(elake_script("info", lake=tmp_path / "notes"), "info", "no lake at")
    (tmp_path / "file").write_text("not a folder")
    assert_one_line_error(elake_script("sql", "select 1", lake=tmp_path / "file"), "sql")


def test_a_bad_tag_is_one_line(small_lake):
    assert_one_line_error(elake_script("sql", "select 1", "--at", "nosuch", lake=small_lake), "sql", "nosuch")
    assert_one_line_error(elake_script("tag", "../escape", lake=small_lake), "tag", "tag")


def test_a_corrupt_lance_dataset_is_one_line(small_lake, tmp_path):
    broken = tmp_path / "lake"
    shutil.copytree(small_lake, broken)
    for manifest in (broken / "episodes.lance" / "_versions").glob("*.manifest"):
        manifest.write_bytes(b"garbage")
    proc = elake_script("info", lake=broken)
    assert_one_line_error(proc, "info", "Lance", "elake recover")
    assert ".rs:" not in proc.stderr  # Lance's Rust source locations are noise to a user
    for data in (broken / "steps.lance" / "data").glob("*.lance"):
        data.write_bytes(b"garbage")
    assert_one_line_error(elake_script("sql", "select count(*) from steps", lake=broken), "sql")


def test_a_usage_error_is_one_line(small_lake):
    proc = elake_script("sql", "select 1", "--format", "xml", lake=small_lake)
    assert proc.returncode == 2
    assert_one_line_error(proc, "sql", "--format", "'xml' is not one of", "elake sql --help")


def test_debug_prints_the_traceback_before_the_line(small_lake):
    for argv in (["--debug", "sql", "selec 1"], ["sql", "selec 1", "--debug"]):
        proc = elake_script(*argv, lake=small_lake)
        assert proc.returncode == 1
        assert "Traceback" in proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith("elake sql: query failed")


@pytest.mark.parametrize(("error", "code", "fragments"), [
    (KeyboardInterrupt(), 130, ["interrupted"]),
    (FileNotFoundError(2, "No such file or directory", "/data/x.json"), 1,
     ["No such file or directory: /data/x.json"]),
    (PermissionError(13, "Permission denied", "/root/lake"), 1, ["Permission denied: /root/lake"]),
    (OSError(28, "No space left on device"), 1, ["No space left on device"]),
    (duckdb.CatalogException("Catalog Error: Table with name nope does not exist!\nLINE 1: ..."), 1,
     ["DuckDB:", "nope does not exist! LINE 1"]),
    (ValueError("LanceError(IO): bad manifest, /rust/lance/src/io.rs:1:2"), 1, ["Lance", "bad manifest"]),
    (TypeError("unsupported operand"), 1,
     ["unexpected error: TypeError: unsupported operand", "run with --debug for the traceback"]),
])
def test_each_kind_of_error_is_one_line_with_its_exit_code(capsys, error, code, fragments):
    assert cli.report_error(error, "demo") == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("elake demo: ") and ".rs:" not in err
    for fragment in fragments:
        assert fragment in err


def test_an_interrupt_inside_a_command_is_one_line(monkeypatch, capsys, tmp_path):
    from episodelake.api.cli import lake as commands

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "Lake", interrupted)  # Ctrl-C while the lake opens
    assert cli.main(["--lake", str(tmp_path), "info"]) == 130
    assert capsys.readouterr().err == "elake info: interrupted\n"


def test_sql_prints_stored_control_characters_as_escapes_not_terminal_commands(tmp_path):
    # a name stored by an older release, before names refused control characters
    lake = Lake(tmp_path / "lake")
    lake.upsert("sets", [{"set_id": "s1", "name": "red\x1b[31m\x07", "kind": "failure"}])
    out = elake("sql", "select name from sets", lake=lake.path).stdout
    assert "\x1b" not in out and "\x07" not in out
    assert "red\\x1b[31m\\x07" in out
