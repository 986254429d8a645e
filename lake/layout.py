"""Where things live inside a lake folder. Every path the product touches is built here.

```
<lake>/
    episodes.lance/  steps.lance/  sets.lance/  ...   one Lance dataset per table
    _spool/<writer_id>/                               a live writer's unacknowledged-to-Lance rows
        lock                                          held (flock) while the writer lives
        <table>-<seq>.arrows                          Arrow IPC streams, replayed after a crash
    _locks/                                           short critical sections (table creation)
    _exports/<export_id>/                             exports started through the API server
```
"""

from __future__ import annotations

import os
import re
from pathlib import Path

DEFAULT_LAKE = "./elake-data"
LAKE_ENV = "ELAKE_LAKE"
SPOOL_DIR = "_spool"
LOCK_DIR = "_locks"
EXPORTS_DIR = "_exports"
SPOOL_LOCK = "lock"
SPOOL_SUFFIX = ".arrows"

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199}$")


def default_lake_path() -> Path:
    return Path(os.environ.get(LAKE_ENV) or DEFAULT_LAKE)


def table_path(lake: Path, table: str) -> Path:
    return lake / f"{table}.lance"


def spool_root(lake: Path) -> Path:
    return lake / SPOOL_DIR


def exports_root(lake: Path) -> Path:
    return lake / EXPORTS_DIR


def lock_path(lake: Path, name: str) -> Path:
    return lake / LOCK_DIR / f"{name}.lock"


def check_id(value: object, field: str) -> str:
    """Validate an identifier that may end up in a filter, a URL or a folder name.

    Ids never contain path separators, `..`, quotes or whitespace, so no id taken from a
    request or a file can reach the filesystem or break out of a query.
    """
    from episodelake.lake.errors import InvalidInput

    if not isinstance(value, str) or not _ID.match(value) or ".." in value:
        raise InvalidInput(
            f"{field} {value!r} is not a valid id: use 1-200 letters, digits and . _ : @ + = -, "
            "starting with a letter or digit, without '..'"
        )
    return value
