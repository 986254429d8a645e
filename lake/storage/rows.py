"""Typed rows: a table's columns declared once, as a class, which emits the Arrow schema.

Each table of the lake is a `Row` subclass in `episodelake.lake.storage.schema`; its fields are
the table's columns in order, and `arrow_schema()` turns them into the `pa.Schema` that the
writer stores and the SQL views read. The same classes are the API's row models (the API
subclasses them to hide a column or add a computed one), so a column added to the class
reaches storage, the API, its OpenAPI document and the type checker at once.

How a field becomes a column:

- its Python type picks the Arrow type: `str` string, `bool` bool, `int` int64, `float`
  float64, `datetime` timestamp[us, UTC], `list[X]` a list of X, a `Row` a struct;
- an `Arrow(...)` in the field's `Annotated` metadata overrides it (int32, float32, a blob,
  a fixed-size list), and `Int32`, `Float32`, `Blob`, `Binary`, `JsonText`, `JsonObject` and `JsonValue`
  name the ones the tables use;
- `X | None` makes the column nullable; a field without None is a required, non-null column.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, ClassVar, Union, get_args, get_origin

import pyarrow as pa
from pydantic import BaseModel, BeforeValidator, ConfigDict

#: Metadata that makes Lance store a column out of line as a blob (read lazily, by row).
BLOB_METADATA = {"lance-encoding:blob": "true"}
#: Every timestamp in the lake: microseconds, UTC.
TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class Arrow:
    """The Arrow type (and field metadata) of a column whose Python type does not say it."""

    type: pa.DataType
    #: field metadata as (key, value) pairs: hashable, as typing needs of `Annotated` values
    metadata: tuple[tuple[str, str], ...] = ()


Int32 = Annotated[int, Arrow(pa.int32())]
Float32 = Annotated[float, Arrow(pa.float32())]
#: Bytes stored out of line (Lance blob encoding): screenshots, read by row when asked.
Blob = Annotated[bytes, Arrow(pa.large_binary(), tuple(BLOB_METADATA.items()))]
#: Bytes stored in line (small derived images such as thumbnails).
Binary = Annotated[bytes, Arrow(pa.large_binary())]
#: A string column holding JSON text, kept as text (parsed by whoever reads it).
JsonText = Annotated[str, Arrow(pa.string())]


def _parsed(value: Any) -> Any:
    """JSON text as stored becomes its value; a value already parsed passes as it is."""
    return json.loads(value) if isinstance(value, str | bytes) else value


#: A string column holding a JSON object; a row model holds (and the API shows) the object.
JsonObject = Annotated[dict[str, Any], BeforeValidator(_parsed), Arrow(pa.string())]
#: A string column holding JSON whose shape a reader declares (a subclass narrows the type).
JsonValue = Annotated[Any, BeforeValidator(_parsed), Arrow(pa.string())]


class Row(BaseModel):
    """One row of a lake table; subclasses declare the columns in their stored order."""

    model_config = ConfigDict(extra="forbid")

    #: The table's name in the lake (`steps`, `episodes`, ...); None for a struct's row.
    table: ClassVar[str | None] = None

    @classmethod
    def arrow_schema(cls) -> pa.Schema:
        return pa.schema([_arrow_field(name, info.annotation, info.metadata, info.is_required())
                          for name, info in cls.model_fields.items()])

    @classmethod
    def arrow_struct(cls) -> pa.StructType:
        return pa.struct(list(cls.arrow_schema()))


def _arrow_field(name: str, annotation: Any, metadata: list[Any], required: bool) -> pa.Field:
    inner, nullable = _strip_none(annotation)
    if required and nullable:
        raise TypeError(f"column {name!r}: a required field cannot be None; give it a default of None")
    marker = next((m for m in metadata if isinstance(m, Arrow)), None)
    if marker is None:
        inner, more = _strip_annotated(inner)
        marker = next((m for m in more if isinstance(m, Arrow)), None)
    if marker is not None:
        return pa.field(name, marker.type, nullable=nullable, metadata=dict(marker.metadata) or None)
    return pa.field(name, arrow_type(inner, name), nullable=nullable)


def arrow_type(annotation: Any, name: str = "?") -> pa.DataType:
    """The Arrow type of a Python type (see the module docstring for the mapping)."""
    annotation, metadata = _strip_annotated(annotation)
    marker = next((m for m in metadata if isinstance(m, Arrow)), None)
    if marker is not None:
        return marker.type
    simple = {str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64(),
              datetime: TIMESTAMP, bytes: pa.large_binary()}
    if annotation in simple:
        return simple[annotation]
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        return pa.list_(arrow_type(item, name))
    if isinstance(annotation, type) and issubclass(annotation, Row):
        return annotation.arrow_struct()
    raise TypeError(f"column {name!r}: no Arrow type for {annotation!r}; annotate it with Arrow(...)")


def _strip_none(annotation: Any) -> tuple[Any, bool]:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(args) < len(get_args(annotation)):
            return args[0], True
    return annotation, False


def _strip_annotated(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    if get_origin(annotation) is typing.Annotated:
        base, *metadata = get_args(annotation)
        return base, tuple(metadata)
    return annotation, ()
