"""POST /api/sql: read-only SQL through the lake's sandbox (one SELECT, time limit), cut at a
row cap and a byte cap; GET /api/sql/download: the same, as a CSV or Parquet file.

The byte cap holds twice: the sandbox stops reading once the Arrow data passes it (so a huge
result never sits in memory), and rows are added to the response only while their JSON
stays under it (cells are encoded differently from Arrow: numbers grow, escapes grow).
"""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime, time
from decimal import Decimal
from time import perf_counter
from typing import Annotated, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from fastapi import APIRouter, Query, Response

from episodelake.api.deps import (
    CuratorDep,
    IdPath,
    IfMatchDep,
    LakeDep,
    PersonDep,
    SettingsDep,
    etag,
    needs,
)
from episodelake.api.errors import STALE_RESPONSES
from episodelake.api.models import (
    SavedQuery,
    SavedQueryCreate,
    SavedQueryUpdate,
    SqlRequest,
    SqlResult,
    SqlTable,
)
from episodelake.lake.curation import saved_queries
from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import InvalidInput

router = APIRouter(tags=["sql"])
MAX_CELL_CHARS = 4000
#: The response's fixed part (keys, column list, numbers) is small; this bounds it.
ENVELOPE_BYTES = 1024


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


@router.get("/sql/saved", response_model=list[SavedQuery])
def saved(lake: LakeDep) -> list[dict]:
    """The team's saved queries, by name, each with its owner."""
    return saved_queries.list_queries(lake)


@router.post("/sql/saved", response_model=SavedQuery, status_code=201)
def save(lake: LakeDep, who: CuratorDep, body: SavedQueryCreate, response: Response) -> dict:
    """Save a query under a name no other saved query has (409 names its owner)."""
    return etag(response, saved_queries.save(lake, body.name, body.query, owner=who))


@router.get("/sql/saved/{query_id}", response_model=SavedQuery)
def saved_one(lake: LakeDep, query_id: IdPath, response: Response) -> dict:
    """One saved query; its version is the ETag, to send back as If-Match with a change."""
    return etag(response, saved_queries.get(lake, query_id))


@router.patch("/sql/saved/{query_id}", response_model=SavedQuery, responses=STALE_RESPONSES)
def update_saved(lake: LakeDep, user: PersonDep, query_id: IdPath, body: SavedQueryUpdate, version: IfMatchDep,
                 response: Response) -> dict:
    """Rename a saved query or replace its text: its owner's or an admin's to change (403
    otherwise). With If-Match, a query saved since is refused (412, naming who saved it)."""
    return etag(response, saved_queries.update(
        lake, query_id, who=user.name if user else None, admin=user is None or user.may("admin"),
        expected_version=version, **body.model_dump(exclude_unset=True)))


@router.delete("/sql/saved/{query_id}", status_code=204, response_class=Response, responses=STALE_RESPONSES)
def delete_saved(lake: LakeDep, user: PersonDep, query_id: IdPath, version: IfMatchDep) -> Response:
    """Delete a saved query: its owner's or an admin's to delete (403 otherwise)."""
    saved_queries.delete(lake, query_id, who=user.name if user else None, admin=user is None or user.may("admin"),
                         expected_version=version)
    return Response(status_code=204)


@router.get("/sql/tables", response_model=list[SqlTable])
def tables() -> list[dict]:
    """Every table a query can name, with its columns and their Arrow types (the schema
    browser of the SQL console); columns no query sees (token hashes) are left out."""
    out = []
    for name, arrow in schema.TABLES.items():
        hidden = schema.SECRET_COLUMNS.get(name, ())
        out.append({"name": name, "image_columns": list(schema.IMAGE_COLUMNS.get(name, ())),
                    "columns": [{"name": f.name, "type": str(f.type)} for f in arrow if f.name not in hidden]})
    return out


@router.post("/sql", response_model=SqlResult, openapi_extra=needs("viewer"))
def sql(lake: LakeDep, settings: SettingsDep, body: SqlRequest) -> dict:
    """Run one read-only query; `truncated` says a cap cut the result, `truncated_by` which."""
    started = perf_counter()
    max_rows = min(body.max_rows or settings.sql_max_rows, settings.sql_max_rows)
    table, truncated = lake.sql_sandboxed(body.query, max_rows=max_rows,
                                          max_bytes=settings.sql_max_bytes,
                                          timeout_s=settings.sql_timeout_s)
    columns = [{"name": f.name, "type": str(f.type)} for f in table.schema]
    by = ("rows" if table.num_rows >= max_rows else "bytes") if truncated else None
    budget = settings.sql_max_bytes - ENVELOPE_BYTES - len(json.dumps(columns))
    rows = []
    # column by column: `select 1, 1` has two columns of the same name
    values = [table.column(i).to_pylist() for i in range(table.num_columns)]
    for row in zip(*values, strict=True):
        out = [cell(v) for v in row]
        budget -= len(json.dumps(out, ensure_ascii=False, default=str).encode()) + 1
        if budget < 0:
            truncated, by = True, "bytes"
            break
        rows.append(out)
    return {"columns": columns, "rows": rows, "truncated": truncated, "truncated_by": by,
            "elapsed_ms": (perf_counter() - started) * 1000}


def csv_text(value: object) -> str:
    """A CSV field: the grid's cell, with lists and objects as JSON and NULL as empty."""
    value = cell(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def csv_bytes(table: pa.Table) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.column_names)
    values = [table.column(i).to_pylist() for i in range(table.num_columns)]
    writer.writerows([csv_text(v) for v in row] for row in zip(*values, strict=True))
    return out.getvalue().encode()


def parquet_bytes(table: pa.Table) -> bytes:
    out = io.BytesIO()
    try:
        pq.write_table(table, out)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as exc:  # e.g. a struct with no field
        raise InvalidInput(f"format: Parquet cannot hold this result ({exc}); download it as csv") from None
    return out.getvalue()


DOWNLOADS = {"csv": ("text/csv; charset=utf-8", csv_bytes), "parquet": ("application/vnd.apache.parquet", parquet_bytes)}


@router.get("/sql/download", response_class=Response,
            responses={200: {"content": {media.split(";")[0]: {} for media, _ in DOWNLOADS.values()},
                             "description": "the result as a file; X-Elake-Truncated: no, rows or bytes"}})
def sql_download(
    lake: LakeDep, settings: SettingsDep,
    query: Annotated[str, Query(min_length=1, max_length=20_000, description="one read-only query")],
    format: Annotated[Literal["csv", "parquet"], Query(description="csv (lists as JSON) or parquet (types kept)")] = "csv",
) -> Response:
    """A query's whole result as a file, through the same sandbox and caps as POST /api/sql
    (the Arrow byte cap included): a GET, so a plain link downloads it."""
    table, truncated = lake.sql_sandboxed(query, max_rows=settings.sql_max_rows,
                                          max_bytes=settings.sql_max_bytes, timeout_s=settings.sql_timeout_s)
    by = ("rows" if table.num_rows >= settings.sql_max_rows else "bytes") if truncated else "no"
    media, encode = DOWNLOADS[format]
    return Response(encode(table), media_type=media, headers={
        "Content-Disposition": f'attachment; filename="query.{format}"', "X-Elake-Truncated": by})
