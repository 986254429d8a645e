"""Where things live for a lake. Every path the product touches is built here.

```
<lake>/                                               a folder, or s3://bucket/prefix (gs://, az://)
    episodes.lance/  steps.lance/  sets.lance/  ...   one Lance dataset per table
    _claims.lance/                                    episodes being recorded (remote lakes only)
    _machines.lance/                                  the machine ids writing it (remote lakes only)
```
Beside the tables, a lake has state that only makes sense on the machine that made it: the
write-ahead spool of each live writer, short critical sections (file locks) and exports
started through the API server. For a local lake it lives inside the lake folder, next to
the data it protects; for a lake on an object store, in a local folder per lake under
`$ELAKE_SPOOL` (default `~/.cache/episodelake/spool`), named after the lake's URI
(`<bucket_prefix>-<hash>`), so a crashed writer on a node is replayed by the next writer on
that node opening the same lake (or by `elake recover --spool DIR` anywhere the folder is
copied to):

```
local lake                         remote lake
<lake>/_spool/<writer_id>/         $ELAKE_SPOOL/<key>/spool/<writer_id>/     a live writer's rows
    lock                               lock                                  held (flock) while it lives
    <table>-<seq>.arrows               <table>-<seq>.arrows                  replayed after a crash
<lake>/_spool/.damaged/            $ELAKE_SPOOL/<key>/spool/.damaged/        segments with unreadable bytes
<lake>/_locks/                     $ELAKE_SPOOL/<key>/locks/                 short critical sections
<lake>/_exports/<export_id>/       $ELAKE_SPOOL/<key>/exports/<export_id>/   exports started through the API
<lake>/_cache/thumbnails/          $ELAKE_SPOOL/<key>/cache/thumbnails/      screenshot thumbnails, by content
                                   $ELAKE_SPOOL/<key>/lake.txt               the lake's URI (no credentials)
```
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
from pathlib import Path

from episodelake.lake.storage.store import Location, location

SPOOL_ENV = "ELAKE_SPOOL"
#: This machine's name in a remote lake's claims (`machine_id`); the host name by default.
MACHINE_ENV = "ELAKE_MACHINE_ID"
DEFAULT_SPOOL = "~/.cache/episodelake/spool"
SPOOL_DIR = "_spool"
LOCK_DIR = "_locks"
EXPORTS_DIR = "_exports"
CACHE_DIR = "_cache"
CLAIMS_TABLE = "_claims"
MACHINES_TABLE = "_machines"
SPOOL_LOCK = "lock"
SPOOL_SUFFIX = ".arrows"
#: In a remote lake's local folder: the lake's URI, so a copied spool names its lake.
LAKE_NOTE = "lake.txt"

#: An id: letters, digits and . _ : @ + = -, starting with a letter or digit, never `..`
#: (a dot is followed by another character or ends the id), at most ID_MAX characters. The
#: API declares the same pattern for every id in a URL, so its OpenAPI document tells clients.
ID_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9_:@+=-]|\.[A-Za-z0-9_:@+=-])*\.?$"
ID_MAX = 200
_ID = re.compile(ID_PATTERN)


def table_path(lake: Location | Path | str, table: str) -> Location:
    return location(lake) / f"{table}.lance"


def machine_id() -> str:
    """This machine's name in a remote lake's claims: `$ELAKE_MACHINE_ID`, else the host name.
    Each machine writing one lake needs its own (`claims.register_machine` refuses a second
    machine with a name already taken): a claim names the machine that holds it, and a
    holder on this machine is judged alive or dead by its spool here."""
    return (os.environ.get(MACHINE_ENV) or "").strip() or socket.gethostname()


def local_spool_base() -> Path:
    """Where remote lakes keep their local state on this machine (`$ELAKE_SPOOL`)."""
    return Path(os.environ.get(SPOOL_ENV) or DEFAULT_SPOOL).expanduser()


def local_state(lake: Location | Path | str) -> Path:
    """This machine's folder for a remote lake (see the module docstring); for a local lake,
    the lake folder itself."""
    loc = location(lake)
    if loc.is_local:
        return loc.local
    folder = local_spool_base() / loc.key()
    note = folder / LAKE_NOTE
    if not note.exists():
        folder.mkdir(parents=True, exist_ok=True)
        note.write_text(loc.uri + "\n", encoding="utf-8")
    return folder


def spool_root(lake: Location | Path | str) -> Path:
    loc = location(lake)
    return loc.local / SPOOL_DIR if loc.is_local else local_state(loc) / "spool"


def spool_root_in(folder: Path, lake: Location | Path | str) -> Path:
    """The spool root a person pointed at with `--spool DIR`: `DIR` may be `$ELAKE_SPOOL`
    (the lake's folder is found under it), the lake's folder, or its `spool` folder."""
    loc = location(lake)
    for candidate in (folder / loc.key() / "spool", folder / "spool"):
        if candidate.is_dir():
            return candidate
    return folder


def check_spool_folder(folder: Path, lake: Location | Path | str) -> Path:
    """The spool root under `folder` (`spool_root_in`), refused with one line naming
    `--spool` unless it is one: an existing folder whose every entry is a writer's spool
    (`<writer_id>/lock`, `<table>-<seq>.arrows`) or a kept folder (`.damaged`). So a wrong
    path, or a system folder, is never replayed as a spool and never said to hold 0 rows."""
    from episodelake.lake.storage.errors import InvalidInput

    shown = str(folder)
    if not folder.exists():
        raise InvalidInput(f"--spool {shown}: no such folder")
    if not folder.is_dir():
        raise InvalidInput(f"--spool {shown}: not a folder")
    root = spool_root_in(folder, lake)
    entries = sorted(p for p in root.iterdir() if not p.name.startswith("."))
    strangers = [p for p in entries if not (p.is_dir() and (p / SPOOL_LOCK).is_file()
                                             and all(_writer_file(f.name) for f in p.iterdir()))]
    if strangers or not entries:
        why = f"{strangers[0].name!r} is not a writer's spool" if strangers else "it is empty"
        raise InvalidInput(f"--spool {shown}: not a spool folder ({why}); give $ELAKE_SPOOL as copied from "
                           "the machine, the lake's folder under it, or that folder's spool/ (a writer's "
                           f"spool holds {SPOOL_LOCK} and <table>-<seq>{SPOOL_SUFFIX} files)")
    return root


#: What else a writer's spool folder holds beside its lock and segments: hand-offs to the
#: committer (`<n>-<table>.offer.json`, `.taken.json`, `.done.json`, `.retry.json`), notes of
#: provisional claims (`claim-<token>.json`, `.lost.json`) and shared-commit requests
#: (`<arrival>.<table>.<kind>.request`).
WRITER_FILE_SUFFIXES = (SPOOL_SUFFIX, ".json", ".request")


def _writer_file(name: str) -> bool:
    return name == SPOOL_LOCK or name.startswith(".") or name.endswith(WRITER_FILE_SUFFIXES)


def exports_root(lake: Location | Path | str) -> Path:
    loc = location(lake)
    return loc.local / EXPORTS_DIR if loc.is_local else local_state(loc) / "exports"


def thumbnail_path(lake: Location | Path | str, image_sha256: str, max_side: int) -> Path:
    """A cached thumbnail: named by the screenshot's sha256 and size, so it never goes stale
    (stored screenshots never change) and identical screens share one file."""
    loc = location(lake)
    root = loc.local / CACHE_DIR if loc.is_local else local_state(loc) / "cache"
    return root / "thumbnails" / image_sha256[:2] / f"{image_sha256}-{max_side}.jpg"


def lock_path(lake: Location | Path | str, name: str) -> Path:
    """A file lock for a short critical section on this machine. For a remote lake it guards
    processes of this machine only; what must hold across machines uses a Lance commit."""
    loc = location(lake)
    root = loc.local / LOCK_DIR if loc.is_local else local_state(loc) / "locks"
    return root / f"{name}.lock"


def lock_state(path: Path) -> str:
    """Whether the process that made the lock file `path` (and holds an flock on it while it
    lives) is "alive", "dead" (the file is there, the lock free) or "gone" (no file: it let go
    cleanly, or its leftovers were dealt with). The one probe for every "is its holder still
    running?" on this machine: spool writers, job owners. The file is never created here."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return "gone"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return "alive"
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return "dead"
    finally:
        os.close(fd)


def check_id(value: object, field: str) -> str:
    """Validate an identifier that may end up in a filter, a URL or a folder name.

    Ids never contain path separators, `..`, quotes or whitespace, so no id taken from a
    request or a file can reach the filesystem or break out of a query.
    """
    from episodelake.lake.storage.errors import InvalidInput

    if not isinstance(value, str) or len(value) > ID_MAX or not _ID.match(value):
        raise InvalidInput(
            f"{field} {value!r} is not a valid id: use 1-200 letters, digits and . _ : @ + = -, "
            "starting with a letter or digit, without '..'"
        )
    return value
