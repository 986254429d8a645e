"""`elake info | sql | tag | optimize | recover`: looking into and looking after a lake."""

from __future__ import annotations

import csv
import io
import json
import sys
import unicodedata
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import typer

from episodelake.api.cli.app import Commands, globals_of
from episodelake.lake.storage.errors import InvalidInput
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.layout import check_id, check_spool_folder

commands = Commands()

SqlFormat = Literal["table", "csv", "json", "parquet"]


@commands.command("info", summary="tables, rows, size and versions of the lake")
def cmd_info(ctx: typer.Context,
             as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False) -> None:
    lake = Lake(globals_of(ctx).lake, create=False)
    info = lake.info()
    tags = lake.tags()
    if as_json:
        print(json.dumps({"lake": str(lake.path), "tables": info, "tags": tags}, indent=2))
        return
    print(f"lake {lake.path.resolve()}")
    rows = [{"table": t, "rows": i["rows"], "size": _human_bytes(i["bytes"]), "version": i["version"],
             "fragments": i["fragments"]} for t, i in info.items()]
    print_table(pa.Table.from_pylist(rows))
    print(f"tags: {', '.join(sorted(tags)) or '(none)'}")


@commands.command("sql", summary="run a SQL query over every table (DuckDB; `steps` leaves out images unless named)")
def cmd_sql(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(metavar="QUERY", show_default=False, help='e.g. "select task_name, '
                                         'avg(success::int) from episodes group by 1"')],
    format: Annotated[SqlFormat, typer.Option(help="how to print the result")] = "table",
    out: Annotated[Path | None, typer.Option(help="write the result to this file instead of stdout")] = None,
    at: Annotated[str | None, typer.Option(metavar="TAG", help="query the lake as of this tag")] = None,
    max_rows: Annotated[int, typer.Option(help="rows printed in table format (default 50)",
                                          show_default=False)] = 50,
) -> None:
    if max_rows < 1:
        raise InvalidInput(f"--max-rows: give 1 or more rows, not {max_rows} (--format csv/json/parquet "
                           "--out FILE writes every row)")
    lake = Lake(globals_of(ctx).lake, create=False)
    if at:
        lake = lake.at(at)
    try:
        result = lake.sql(query)
    except duckdb.Error as exc:  # a typo in a column name is the user's to fix, not a crash
        raise InvalidInput(f"query failed: {exc}") from None
    if format == "parquet":
        if not out:
            raise InvalidInput("--format parquet needs --out FILE")
        pq.write_table(result, out)
        return
    stream = open(out, "w", encoding="utf-8", newline="") if out else sys.stdout
    try:
        if format == "table":
            print_table(result, max_rows if not out else result.num_rows, stream)
        elif format == "csv":
            binary_free = result.select([c for c in result.column_names
                                         if not pa.types.is_binary(result.schema.field(c).type)
                                         and not pa.types.is_large_binary(result.schema.field(c).type)])
            write_csv(binary_free, stream)
        else:
            for row in result.to_pylist():
                stream.write(json.dumps(row, default=_json_default, ensure_ascii=False) + "\n")
    finally:
        if out:
            stream.close()


@commands.command("tag", summary="tag the current version of every table, list or delete tags")
def cmd_tag(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(metavar="NAME", show_default=False,
                                               help="tag to create (omit with --list)")] = None,
    list_tags: Annotated[bool, typer.Option("--list", help="list tags and the table versions they pin")] = False,
    delete: Annotated[bool, typer.Option("--delete", help="delete the tag NAME")] = False,
) -> None:
    if name is not None:
        check_id(name, "tag")  # an empty or blank name is refused, not read as --list
    lake = Lake(globals_of(ctx).lake, create=False)
    if list_tags or name is None:
        for tag, pinned in sorted(lake.tags().items()):
            print(f"{tag}: " + ", ".join(f"{t}@{v}" for t, v in sorted(pinned.items())))
        return
    if delete:
        lake.delete_tag(name)
        print(f"deleted tag {name}")
        return
    pinned = lake.create_tag(name)
    print(f"tagged {name}: " + ", ".join(f"{t}@{v}" for t, v in pinned.items()))


@commands.command("optimize", summary="compact fragments, rebuild indexes, prune old untagged versions")
def cmd_optimize(
    ctx: typer.Context,
    prune_days: Annotated[float, typer.Option(show_default=False, help="remove untagged versions older "
                                              "than this many days (default 7)")] = 7.0,
    keep_versions: Annotated[bool, typer.Option("--keep-versions", help="prune no version at all")] = False,
) -> None:
    if not 0 <= prune_days < float("inf"):
        raise InvalidInput(f"--prune-days: give 0 or more days, not {prune_days:g} (--keep-versions "
                           "prunes nothing)")
    lake = Lake(globals_of(ctx).lake, create=False)
    prune = None if keep_versions else timedelta(days=prune_days)
    report = lake.optimize(prune_older_than=prune)
    rows = [{"table": t, **r} for t, r in report.items()]
    print_table(pa.Table.from_pylist(rows))


@commands.command("recover", summary="replay spools left by crashed writers and check every table reads")
def cmd_recover(
    ctx: typer.Context,
    spool: Annotated[Path | None, typer.Option(
        help="replay the spools in this folder (copied from another machine: $ELAKE_SPOOL there, or "
        "the lake's folder under it) instead of this machine's", show_default=False)] = None,
    release_claims: Annotated[str | None, typer.Option(
        metavar="HOST", show_default=False,
        help="then release the episode claims of machine HOST on a lake on an object store: for a "
        "machine that is gone with its spool (what it had not committed is lost with it)")] = None,
    restore_conflicts: Annotated[bool, typer.Option(
        "--restore-conflicts", help="store each episode set aside on this machine (its id, given while "
        "the store was down, was found taken when the claim was settled) under a new id, "
        "<id>-<8 hex>, the old id kept as recorded_as in its extra")] = False,
) -> int:
    from episodelake.lake.storage import claims, conflicts

    lake = Lake(globals_of(ctx).lake, create=False)
    if spool is not None:
        check_spool_folder(spool, lake.location)
    report = lake.recover(spool)
    print(f"replayed {report['rows_replayed']} row(s) from crashed writers' spools")
    if release_claims is not None:
        released = claims.release_host(lake.location, release_claims)
        episodes = sorted({r["episode_id"] for r in released})
        print(f"released {len(released)} claim(s) of {release_claims}"
              + (f" on episode(s) {', '.join(episodes[:10])}{' ...' if len(episodes) > 10 else ''}" if episodes else ""))
    if restore_conflicts:
        for old, new, counts in conflicts.restore(lake.location):
            print(f"restored set-aside episode {old} as {new} ({_counts(counts)})")
    for kept in conflicts.listed(lake.location):
        print(f"set aside: episode {kept.episode_id} ({_counts(kept.rows)}) in {kept.folder}: its id, given "
              "while the store was down, was found taken; `elake recover --restore-conflicts` stores it "
              "under a new id")
    if report.get("torn_tails"):
        print(f"dropped the torn last write of {report['torn_tails']} segment(s) (never acknowledged)")
    for line in report.get("damaged", ()):
        print(line)
    for table, problem in report["problems"].items():
        print(f"table {table}: {problem}")
    return 1 if report["problems"] else 0


def _counts(rows: dict[str, int]) -> str:
    return ", ".join(f"{n} {table} row(s)" for table, n in sorted(rows.items()))


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


def print_table(table: pa.Table, max_rows: int = 50, out=None) -> None:
    """A plain fixed-width rendering of an Arrow table (for terminals)."""
    out = out or sys.stdout
    names = table.column_names
    rows = [[_cell(v) for v in row.values()] for row in table.slice(0, max_rows).to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    print("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)), file=out)
    if table.num_rows > max_rows:
        print(f"... {table.num_rows - max_rows} more rows (use --format csv/json/parquet --out FILE)", file=out)
    print(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})", file=out)


def _cell(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value).replace("\n", " ")
    # stored text is data, never terminal commands: an escape or a bell prints as its escape
    text = "".join(c if unicodedata.category(c) != "Cc" else repr(c)[1:-1] for c in text)
    return text if len(text) <= 60 else text[:57] + "..."


def write_csv(table: pa.Table, out) -> None:
    """RFC 4180 CSV: a header cell is quoted only when it needs it (a column named
    `round(avg(x), 2)` or `a"b`), so plain names stay plain; Arrow writes the rows."""
    header = io.StringIO()
    csv.writer(header, lineterminator="\n").writerow(table.column_names)
    out.write(header.getvalue())
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    out.write(sink.getvalue().to_pybytes().decode())


def _json_default(value):
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return str(value)
