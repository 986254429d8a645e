"""POST /api/sql: read-only SQL through the lake's sandbox (one SELECT, row cap, time limit)."""

from __future__ import annotations

from datetime import date, datetime, time
from decimal import Decimal
from time import perf_counter

from fastapi import APIRouter

from episodelake.api.deps import LakeDep, SettingsDep
from episodelake.api.models import SqlRequest, SqlResult

router = APIRouter(tags=["sql"])
MAX_CELL_CHARS = 4000


def cell(value: object) -> object:
    """A JSON-safe cell: bytes are summarised (images do not belong in a grid), long text cut."""
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return value[:MAX_CELL_CHARS] + "..."
    if isinstance(value, list | tuple):
        return [cell(v) for v in value]
    if isinstance(value, dict):
        return {str(k): cell(v) for k, v in value.items()}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


@router.post("/sql", response_model=SqlResult)
def sql(lake: LakeDep, settings: SettingsDep, body: SqlRequest) -> dict:
    """Run one read-only query; `truncated` says the row cap cut the result."""
    started = perf_counter()
    max_rows = min(body.max_rows or settings.sql_max_rows, settings.sql_max_rows)
    table, truncated = lake.sql_sandboxed(body.query, max_rows=max_rows, timeout_s=settings.sql_timeout_s)
    columns = [{"name": f.name, "type": str(f.type)} for f in table.schema]
    # column by column: `select 1, 1` has two columns of the same name
    values = [table.column(i).to_pylist() for i in range(table.num_columns)]
    rows = [[cell(v) for v in row] for row in zip(*values, strict=True)]
    return {"columns": columns, "rows": rows, "truncated": truncated,
            "elapsed_ms": (perf_counter() - started) * 1000}
