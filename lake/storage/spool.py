"""The write-ahead spool: rows a writer acknowledged but has not yet committed to Lance.

Each live writer owns a folder `<spool root>/<writer_id>/` and holds an flock on its `lock`
file for as long as it lives. The spool root is always on local disk (`layout.spool_root`: in
the lake folder for a local lake, under `$ELAKE_SPOOL` for a lake on an object store), so the
flock and the appends are local whatever the lake is; nothing here knows where the lake is. Rows go to Arrow IPC stream segments, one per table and sequence number;
once a segment's rows are committed to Lance the segment is deleted. A folder whose lock can
be taken belongs to a writer that died: its segments are replayed (with the table key making
the replay idempotent) and the folder is removed.

A segment only grows by whole records (a failed write is cut back before it is reported), so
the only damage a crash or a full disk can leave is a torn last record, which was never
acknowledged. Replay still reads each record on its own and validates it, so a file damaged
some other way costs only its unreadable bytes, never the records around them.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from episodelake.lake.storage import layout, schema
from episodelake.lake.storage.errors import LakeError

log = logging.getLogger(__name__)

#: Under the spool root: segments whose middle held unreadable bytes, kept after replay.
#: Hidden (a leading dot), so no writer takes it for a dead writer's folder.
DAMAGED_DIR = ".damaged"
#: Under the spool root: rows of episodes whose claim was lost when it was settled (a
#: caller-given id taken while the store was down, that another writer turned out to hold):
#: `<episode_id>/<table>-<n>.arrow`, never committed under that id (`claims`, `set_aside`).
CONFLICTS_DIR = ".conflicts"


class SpoolWriteError(LakeError):
    """A row could not be written to the spool, so it was not recorded (not acknowledged).

    The segment is cut back to its last whole record first, so rows appended after the
    problem is fixed (space freed) follow good records and replay stays exact.
    """

    def __init__(self, path: Path, needed: int, exc: OSError):
        try:
            free = shutil.disk_usage(path.parent).free
        except OSError:
            free = -1
        self.needed_bytes = needed
        self.free_bytes = free
        self.errno = exc.errno
        room = f"{_mb(free)} free" if free >= 0 else "free space unknown"
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST):
            super().__init__(
                f"spool: {path} is not a writable folder ({exc.strerror or exc}); nothing was recorded: make the "
                f"folder writable, or point {layout.SPOOL_ENV} at a writable folder (a lake on object "
                "storage keeps its spool under it; a lake in a local folder keeps it in the lake's own "
                f"{layout.SPOOL_DIR} folder)")
            return
        super().__init__(
            f"spool: could not write {_mb(needed)} to {path} ({exc.strerror or exc}; {room}); "
            f"the row was not recorded: free at least {_mb(needed)} on that disk and send it again"
        )

    def __reduce__(self):
        """Pickled whole. An exception pickles as ``cls(*args)``, and this one's args are its
        message alone, so a pool worker or Ray task that raised it reached its caller as a
        TypeError about missing arguments (and a `multiprocessing.Pool` lost its result
        thread and hung) instead of this message."""
        return _rebuilt_spool_error, (str(self), self.__dict__)


def _rebuilt_spool_error(message: str, state: dict) -> SpoolWriteError:
    exc = SpoolWriteError.__new__(SpoolWriteError)
    LakeError.__init__(exc, message)
    exc.__dict__.update(state)
    return exc


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 10_000 else f"{n} bytes"


class Segment:
    """One IPC stream of single-table rows, written with one `pwrite` per record.

    The file only ever grows by whole records: a write that fails part way (a full disk, a
    file-size limit, an I/O error) is cut back to the last whole record before the error is
    raised, so a torn record is never followed by good ones. If even the cut fails, the
    segment is marked broken and the writer moves on to a new one; the broken segment then
    ends in a torn tail, which replay drops (that row was never acknowledged). The bytes are
    exactly what `pyarrow.ipc.new_stream` writes, so any Arrow reader opens a segment.
    """

    def __init__(self, path: Path, table: str, fsync: bool):
        self.path = path
        self.table = table
        self.fsync = fsync
        self.rows = 0
        self.size = 0
        self.broken = False
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise SpoolWriteError(path, 4096, exc) from exc
        try:
            self._write(schema.TABLES[table].serialize())
        except SpoolWriteError:
            self.discard()
            raise

    def append(self, batch: pa.RecordBatch) -> None:
        """Write one record; returns only once it is whole in the file (and fsynced if asked)."""
        if self.broken or self._fd < 0:
            raise RuntimeError(f"spool segment {self.path} no longer takes rows")
        self._write(batch.serialize())
        self.rows += batch.num_rows

    def _write(self, data: pa.Buffer) -> None:
        view = memoryview(data)
        done = 0
        try:
            while done < len(view):
                done += os.pwrite(self._fd, view[done:], self.size + done)
            if self.fsync:
                os.fsync(self._fd)
        except OSError as exc:
            self._cut_back()
            raise SpoolWriteError(self.path, len(view), exc) from exc
        self.size += len(view)

    def _cut_back(self) -> None:
        try:
            os.ftruncate(self._fd, self.size)  # shrinking needs no free space
            if self.fsync:
                os.fsync(self._fd)
        except OSError:
            log.exception("could not cut spool segment %s back to %d bytes; starting a new one",
                          self.path, self.size)
            self.broken = True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def discard(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class Spool:
    """A live writer's spool folder (locked for the writer's lifetime)."""

    def __init__(self, root: Path, fsync: bool = False):
        self.writer_id = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        # Built under a hidden name, locked, then renamed: another writer scanning for dead
        # writers' folders never sees this one without its lock held.
        staging = root / f".{self.writer_id}"
        try:
            staging.mkdir(parents=True)
            self._lock = open(staging / layout.SPOOL_LOCK, "w")
        except OSError as exc:
            raise SpoolWriteError(staging, 4096, exc) from exc
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.dir = root / self.writer_id
        staging.rename(self.dir)
        self.fsync = fsync
        self._seq = 0

    def new_segment(self, table: str) -> Segment:
        self._seq += 1
        return Segment(self.dir / f"{table}-{self._seq:08d}{layout.SPOOL_SUFFIX}", table, self.fsync)

    def close(self) -> None:
        """Remove the folder; only call once every segment has been committed."""
        leftover = list(self.dir.glob(f"*{layout.SPOOL_SUFFIX}"))
        if leftover:
            log.warning("spool %s keeps %d uncommitted segment(s) for replay", self.dir, len(leftover))
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        self._lock.close()


@dataclass
class SegmentRead:
    """What replay found in one segment."""

    rows: pa.Table
    #: bytes at the end that are not a whole record: a write that never returned, so a row
    #: that was never acknowledged
    torn_tail: int = 0
    #: (offset, length) of unreadable bytes followed by good records: only a writer that kept
    #: appending after a failed write leaves these; the records after them are kept
    skipped: list[tuple[int, int]] = field(default_factory=list)


_MARKER = b"\xff\xff\xff\xff"


def read_segment(path: Path) -> SegmentRead:
    """Every whole, valid record of a segment, however the file was damaged.

    Each record is parsed on its own, checked against the table's schema and fully
    validated, and must be followed by the end of the file or by the start of another
    record. Bytes that fail are skipped up to the next offset where a valid record starts;
    if none follows, they are a torn tail. Nothing here raises on damaged bytes.
    """
    table = path.name.rsplit("-", 1)[0]
    data = path.read_bytes()
    buf = pa.py_buffer(data)
    n = len(data)
    try:
        reader = pa.BufferReader(buf)
        file_schema = ipc.read_schema(ipc.read_message(reader))
        pos = reader.tell()
    except (pa.ArrowException, OSError, ValueError, IndexError, EOFError):
        # the schema header itself is cut: the writer died creating the segment, before
        # any row could be acknowledged
        return SegmentRead(schema.empty(table), torn_tail=n)
    batches: list[pa.RecordBatch] = []
    found = SegmentRead(schema.empty(table))
    while pos < n:
        if data[pos:pos + 8] == _MARKER + b"\0\0\0\0":
            break  # end-of-stream marker (a segment closed by an older writer)
        got = _record_at(data, buf, pos, file_schema)
        if got is None:
            start = pos
            pos = _resync(data, buf, pos + 1, file_schema)
            if pos is None:
                found.torn_tail = n - start
                break
            found.skipped.append((start, pos - start))
            continue
        batch, pos = got
        batches.append(batch)
    found.rows = pa.Table.from_batches(batches, schema=file_schema)
    return found


def _record_at(data: bytes, buf: pa.Buffer, pos: int, file_schema: pa.Schema):
    """(batch, end) if a whole, valid record starts at `pos` and is followed by the end of
    the file or the start of another message; else None."""
    if data[pos:pos + 4] != _MARKER:
        return None
    try:
        reader = pa.BufferReader(buf.slice(pos))
        message = ipc.read_message(reader)
        end = pos + reader.tell()
        if message.type != "record batch":
            return None
        batch = ipc.read_record_batch(message, file_schema)
        batch.validate(full=True)
    except (pa.ArrowException, OSError, ValueError, IndexError, EOFError):
        return None
    following = data[end:end + 4]
    if following and following != _MARKER[:len(following)]:
        return None  # the record "ends" inside other bytes: it was cut and overlaps the next
    return batch, end


def _resync(data: bytes, buf: pa.Buffer, start: int, file_schema: pa.Schema) -> int | None:
    """The next offset from `start` where a valid record begins, or None."""
    pos = data.find(_MARKER, start)
    while pos != -1:
        if _record_at(data, buf, pos, file_schema) is not None:
            return pos
        pos = data.find(_MARKER, pos + 1)
    return None


def keep_damaged(path: Path) -> Path:
    """Move a segment with unreadable bytes in its middle out of the way (to `.damaged/` of
    its spool root), for a person to look at; replay has already committed every valid
    record in it."""
    target_dir = path.parent.parent / DAMAGED_DIR
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"{path.parent.name}-{path.name}"
    os.replace(path, target)
    return target


def set_aside(root: Path, episode_id: str, table: str, rows: pa.Table, fsync: bool = True) -> Path:
    """Keep `rows` of an episode whose claim was lost in `<root>/.conflicts/<episode_id>/`
    as one Arrow IPC file (durable before it returns; the caller drops the rows from the
    spool only after). A later call adds a file: the same row may be set aside twice (a
    crash between this and the spool's discard), which a reader merges by the table's key."""
    folder = root / CONFLICTS_DIR / episode_id
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{table}-{uuid.uuid4().hex[:12]}.arrow"
    staging = folder / f".{final.name}"
    with open(staging, "wb") as fh:
        with ipc.new_file(fh, rows.schema) as out:
            out.write_table(rows)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(staging, final)
    return folder


def set_aside_episodes(root: Path) -> dict[str, dict[str, pa.Table]]:
    """What `set_aside` kept, by episode and table, each table's rows merged by its key."""
    found: dict[str, dict[str, pa.Table]] = {}
    base = root / CONFLICTS_DIR
    if not base.exists():
        return found
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        by_table: dict[str, list[pa.Table]] = {}
        for path in sorted(folder.glob("*.arrow")):
            if path.name.startswith("."):
                continue
            with ipc.open_file(path) as reader:
                by_table.setdefault(path.name.rsplit("-", 1)[0], []).append(reader.read_all())
        found[folder.name] = {t: _unique(t, pa.concat_tables(parts)) for t, parts in by_table.items()}
    return found


def _unique(table: str, rows: pa.Table) -> pa.Table:
    """The first row of each key (a row set aside twice is the same row)."""
    keys = schema.KEYS.get(table)
    if not keys or rows.num_rows == 0:
        return rows
    seen: set[tuple] = set()
    keep = []
    for i, key in enumerate(zip(*(rows.column(k).to_pylist() for k in keys), strict=True)):
        if key not in seen:
            seen.add(key)
            keep.append(i)
    return rows.take(keep)


def orphaned(root: Path) -> Iterator[tuple[Path, object]]:
    """Yield (folder, held lock) for the folders under spool root `root` whose writer is gone.

    The caller replays the folder while holding the lock, then calls `release(folder, lock)`.
    """
    if not root.exists():
        return
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            fh = open(folder / layout.SPOOL_LOCK)  # never created here: only writers create locks
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()  # a live writer
            continue
        if not folder.exists():
            fh.close()
            continue
        yield folder, fh


def writer_state(folder: Path) -> str:
    """Whether the writer of spool `folder` is "alive" (holds its lock, or is being replayed
    right now: either way, not ours to take), "dead" (left its folder for replay) or "gone"
    (its folder was replayed, or it closed cleanly)."""
    return layout.lock_state(folder / layout.SPOOL_LOCK)


def segments(folder: Path) -> list[Path]:
    """Segments in write order (the sequence number is shared by all tables of a writer)."""
    return sorted(folder.glob(f"*{layout.SPOOL_SUFFIX}"), key=lambda p: p.stem.rsplit("-", 1)[1])


def release(folder: Path, lock, *, remove: bool = True) -> None:
    """Let go of a dead writer's folder: removed once replayed, else kept for the next try."""
    if remove:
        shutil.rmtree(folder, ignore_errors=True)
    lock.close()
