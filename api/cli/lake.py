"""`elake info | sql | tag | optimize | recover`: looking into and looking after a lake."""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from episodelake.lake.errors import InvalidInput
from episodelake.lake.lake import Lake


def register(commands) -> None:
    p = commands.add("info", "tables, rows, size and versions of the lake")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_info)

    p = commands.add("sql", "run a SQL query over every table (DuckDB; `steps` leaves out images unless named)")
    p.add_argument("query", help='e.g. "select task_name, avg(success::int) from episodes group by 1"')
    p.add_argument("--format", choices=("table", "csv", "json", "parquet"), default="table")
    p.add_argument("--out", type=Path, help="write the result to this file instead of stdout")
    p.add_argument("--at", metavar="TAG", help="query the lake as of this tag")
    p.add_argument("--max-rows", type=int, default=50, help="rows printed in table format (default 50)")
    p.set_defaults(func=cmd_sql)

    p = commands.add("tag", "tag the current version of every table, list or delete tags")
    p.add_argument("name", nargs="?", help="tag to create (omit with --list)")
    p.add_argument("--list", action="store_true", help="list tags and the table versions they pin")
    p.add_argument("--delete", action="store_true", help="delete the tag NAME")
    p.set_defaults(func=cmd_tag)

    p = commands.add("optimize", "compact fragments, rebuild indexes, prune old untagged versions")
    p.add_argument("--prune-days", type=float, default=7.0,
                   help="remove untagged versions older than this many days (default 7; -1 keeps all)")
    p.set_defaults(func=cmd_optimize)

    p = commands.add("recover", "replay spools left by crashed writers and check every table reads")
    p.set_defaults(func=cmd_recover)


def _human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


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
    return text if len(text) <= 60 else text[:57] + "..."


def cmd_info(args) -> None:
    lake = Lake(args.lake, create=False)
    info = lake.info()
    tags = lake.tags()
    if args.json:
        print(json.dumps({"lake": str(lake.path), "tables": info, "tags": tags}, indent=2))
        return
    print(f"lake {lake.path.resolve()}")
    rows = [{"table": t, "rows": i["rows"], "size": _human_bytes(i["bytes"]), "version": i["version"],
             "fragments": i["fragments"]} for t, i in info.items()]
    print_table(pa.Table.from_pylist(rows))
    print(f"tags: {', '.join(sorted(tags)) or '(none)'}")


def cmd_sql(args) -> None:
    lake = Lake(args.lake, create=False)
    if args.at:
        lake = lake.at(args.at)
    try:
        result = lake.sql(args.query)
    except duckdb.Error as exc:  # a typo in a column name is the user's to fix, not a crash
        raise InvalidInput(f"query failed: {exc}") from None
    if args.format == "parquet":
        if not args.out:
            raise InvalidInput("--format parquet needs --out FILE")
        pq.write_table(result, args.out)
        return
    out = open(args.out, "w", encoding="utf-8", newline="") if args.out else sys.stdout
    try:
        if args.format == "table":
            print_table(result, args.max_rows if not args.out else result.num_rows, out)
        elif args.format == "csv":
            binary_free = result.select([c for c in result.column_names
                                         if not pa.types.is_binary(result.schema.field(c).type)
                                         and not pa.types.is_large_binary(result.schema.field(c).type)])
            write_csv(binary_free, out)
        else:
            for row in result.to_pylist():
                out.write(json.dumps(row, default=_json_default, ensure_ascii=False) + "\n")
    finally:
        if args.out:
            out.close()


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


def cmd_tag(args) -> None:
    lake = Lake(args.lake, create=False)
    if args.list or not args.name:
        for name, pinned in sorted(lake.tags().items()):
            print(f"{name}: " + ", ".join(f"{t}@{v}" for t, v in sorted(pinned.items())))
        return
    if args.delete:
        lake.delete_tag(args.name)
        print(f"deleted tag {args.name}")
        return
    pinned = lake.create_tag(args.name)
    print(f"tagged {args.name}: " + ", ".join(f"{t}@{v}" for t, v in pinned.items()))


def cmd_optimize(args) -> None:
    lake = Lake(args.lake, create=False)
    prune = None if args.prune_days < 0 else timedelta(days=args.prune_days)
    report = lake.optimize(prune_older_than=prune)
    rows = [{"table": t, **r} for t, r in report.items()]
    print_table(pa.Table.from_pylist(rows))


def cmd_recover(args) -> None:
    lake = Lake(args.lake, create=False)
    report = lake.recover()
    print(f"replayed {report['rows_replayed']} row(s) from crashed writers' spools")
    if report.get("torn_tails"):
        print(f"dropped the torn last write of {report['torn_tails']} segment(s) (never acknowledged)")
    for line in report.get("damaged", ()):
        print(line)
    for table, problem in report["problems"].items():
        print(f"table {table}: {problem}")
    return 1 if report["problems"] else 0
