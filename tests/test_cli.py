"""The `elake` command line, run as a user runs it (a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

from test_clawgui import write_reference_episode


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
