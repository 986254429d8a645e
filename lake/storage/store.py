"""Where a lake is stored: a local folder or an object store (`s3://`, `gs://`, `az://`).

A `Location` is the one value the rest of the product passes around for "the lake" or a path
inside it: it joins paths (`loc / "steps.lance"`), gives Lance its URI and storage options,
and answers the few questions the lake asks of its storage (does this exist, how big is it,
what is under it). Local folders are plain `pathlib` paths underneath; object stores go
through Lance (datasets) and `pyarrow.fs` (listing, sizes). Lance commits on object stores
with conditional writes, so nothing here locks: what needs a lock on a remote lake uses a
Lance commit instead (`episodelake.lake.storage.claims`).

Credentials and endpoint come from an explicit `storage_options` mapping or the standard
variables (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ALLOW_HTTP`; an `http://` endpoint allows plain HTTP by
itself). They live only in the `Location` object: its `str`, `repr` and every error show the
URI alone, and nothing writes them into the lake. A URI carrying credentials itself
(`s3://key:secret@bucket`) is refused. A `Location` pickles with its options, which is how
a lake opened with explicit credentials reaches worker processes and Ray actors and tasks:
on a cluster they travel in Ray's object store (readable by whoever can read that store),
so prefer the standard variables on every node where that matters.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Literal, TypeVar
from urllib.parse import urlsplit

from episodelake.lake.storage.errors import EpisodeLakeError, InvalidInput, LakeError

T = TypeVar("T")

#: Schemes Lance opens as object stores (with the same storage options).
#: where a lake is when none is named, and the variable that names it
DEFAULT_LAKE = "./elake-data"
LAKE_ENV = "ELAKE_LAKE"
REMOTE_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss")
#: Shorter waits than the object-store client's defaults (10 retries over up to 3 minutes), so
#: a wrong endpoint is an error in seconds; a writer retries failed commits on its own anyway.
DEFAULT_CLIENT_OPTIONS = {"connect_timeout": "5s", "timeout": "60s", "client_max_retries": "3",
                          "client_retry_timeout": "30"}
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: How long the listing a lake makes when it opens may wait for the store (seconds), and the
#: variable that changes it. Without credentials some clients look for them on a cloud
#: metadata server that is not there and retry for minutes; a person gets a one-line error.
OPEN_TIMEOUT_ENV = "ELAKE_STORE_OPEN_TIMEOUT_S"
DEFAULT_OPEN_TIMEOUT_S = 20.0


class StoreUnavailable(LakeError):
    """The lake's object store could not be used: unreachable, no such bucket, access denied.
    The message names the lake's URI (never its credentials) and the cause."""


class StoreSilent(StoreUnavailable):
    """The store did not answer within the time a call allowed it (the call may go on in the
    background and still land: see `claims.CommitClaim.take`)."""



def storage_options_from_env(scheme: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Lance storage options from the standard variables (S3 only; Lance reads the GCS and
    Azure variables itself)."""
    env = os.environ if environ is None else environ
    if scheme not in ("s3", "s3a"):
        return {}
    out: dict[str, str] = {}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or env.get("AWS_ENDPOINT")
    names = {"aws_access_key_id": "AWS_ACCESS_KEY_ID", "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
             "aws_session_token": "AWS_SESSION_TOKEN"}
    for option, variable in names.items():
        if env.get(variable):
            out[option] = env[variable]
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        out["aws_region"] = region
    if endpoint:
        out["aws_endpoint"] = endpoint
    allow = (env.get("AWS_ALLOW_HTTP") or "").lower() in ("1", "true", "yes")
    if allow or (endpoint or "").startswith("http://"):
        out["allow_http"] = "true"
    return out


class Location:
    """A lake, or a path inside one, on local disk or an object store.

    One `Location` is made per lake a process opens (`Lake.location`), and it remembers what
    would otherwise be asked of the store again and again: the filesystem client (built
    once, shared with every path inside the lake) and `known_tables`. Neither travels when a
    location is pickled: a worker builds its own."""

    __slots__ = ("uri", "scheme", "_options", "_filesystem", "known_tables")

    def __init__(self, uri: str, scheme: str, options: Mapping[str, str], *, _filesystem=None):
        self.uri = uri
        self.scheme = scheme
        self._options = dict(options)
        self._filesystem = _filesystem
        #: tables of this lake found with the columns this release writes; the product never
        #: removes a table, so once known, a table needs no listing or schema check again in
        #: this process (`episodelake.lake.storage.tables.ensure_tables`)
        self.known_tables: set[str] = set()

    def __reduce__(self):
        return Location, (self.uri, self.scheme, self._options)

    # -- what it is ------------------------------------------------------------------
    @property
    def is_local(self) -> bool:
        return self.scheme == "file"

    @property
    def local(self) -> Path:
        """The local folder; a remote location has none."""
        if not self.is_local:
            raise InvalidInput(f"{self.uri} is on an object store, not a local folder")
        return Path(self.uri)

    @property
    def storage_options(self) -> dict[str, str]:
        """What Lance needs to open datasets here (credentials included: never print it)."""
        return dict(self._options)

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    def __truediv__(self, part: str) -> Location:
        if self.is_local:
            return Location(str(Path(self.uri) / part), self.scheme, self._options)
        return Location(f"{self.uri.rstrip('/')}/{str(part).strip('/')}", self.scheme, self._options,
                        _filesystem=self._filesystem)

    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"Location({self.uri!r})"

    def __fspath__(self) -> str:
        return str(self.local)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and other.uri == self.uri

    def __hash__(self) -> int:
        return hash(self.uri)

    def resolve(self) -> Location:
        return Location(str(Path(self.uri).resolve()), self.scheme, self._options) if self.is_local else self

    def key(self) -> str:
        """A file-name-safe, readable and unique name for this location (a local folder per
        remote lake: its spool, its locks): `<bucket>_<prefix>-<hash of the URI>`."""
        text = self.resolve().uri
        readable = re.sub(r"[^A-Za-z0-9._-]+", "_", text.split("://", 1)[-1]).strip("_.")[:80]
        return f"{readable or 'lake'}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"

    # -- asking the storage ------------------------------------------------------------
    def _fs(self):
        """(pyarrow filesystem, path inside it) for a remote location. The filesystem is built
        once per `Location` (and shared with the paths made from it): building one costs a
        client, its connection pool and, for some stores, a credentials lookup."""
        parts = urlsplit(self.uri)
        path = f"{parts.netloc}{parts.path}".rstrip("/")
        if self._filesystem is None:
            self._filesystem = self._new_fs()
        return self._filesystem, path

    def _new_fs(self):
        import pyarrow.fs as pafs

        o = self._options
        if self.scheme in ("s3", "s3a"):
            endpoint = o.get("aws_endpoint") or o.get("endpoint")
            kwargs: dict = {"region": o.get("aws_region") or o.get("region") or "us-east-1",
                            "connect_timeout": 5, "request_timeout": 30}
            if o.get("aws_access_key_id"):
                kwargs.update(access_key=o["aws_access_key_id"], secret_key=o.get("aws_secret_access_key"),
                              session_token=o.get("aws_session_token"))
            if endpoint:
                split = urlsplit(endpoint)
                kwargs.update(endpoint_override=split.netloc or endpoint, scheme=split.scheme or "https")
            return pafs.S3FileSystem(**kwargs)
        return pafs.FileSystem.from_uri(self.uri)[0]

    def filesystem(self):
        """(pyarrow filesystem, path inside it) of a remote location, for listing and reading
        every object under it (a purge's proof)."""
        if self.is_local:
            raise InvalidInput(f"{self.uri} is a local folder: read it with pathlib")
        return self._fs()

    def exists(self) -> bool:
        if self.is_local:
            return Path(self.uri).exists()
        import pyarrow.fs as pafs

        fs, path = self._fs()
        with store_errors(self):
            return fs.get_file_info(path).type != pafs.FileType.NotFound

    def size(self) -> int:
        """Bytes of every file under this location."""
        if self.is_local:
            return sum(f.stat().st_size for f in Path(self.uri).rglob("*") if f.is_file())
        import pyarrow.fs as pafs

        fs, path = self._fs()
        with store_errors(self):
            infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
        return sum(i.size or 0 for i in infos if i.type == pafs.FileType.File)

    def children(self) -> Iterator[str]:
        """Names directly under this location."""
        if self.is_local:
            root = Path(self.uri)
            yield from (p.name for p in root.iterdir()) if root.exists() else ()
            return
        import pyarrow.fs as pafs

        def listing():
            fs, path = self._fs()
            return fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))

        with store_errors(self):
            infos = bounded(self, listing, "listing the lake")
        yield from (i.base_name for i in infos)

    def mkdir(self) -> None:
        """Create the folder (object stores have none to create)."""
        if self.is_local:
            Path(self.uri).mkdir(parents=True, exist_ok=True)

    def check_reachable(self) -> None:
        """Raise `StoreUnavailable` (one line: URI and cause) unless the store answers and
        the bucket exists (one request)."""
        if self.is_local:
            return
        import pyarrow.fs as pafs

        def bucket_info():
            fs, path = self._fs()
            return fs.get_file_info(path.split("/", 1)[0])

        with store_errors(self):
            bucket = bounded(self, bucket_info, "asking for the bucket")
        if bucket.type == pafs.FileType.NotFound:
            raise StoreUnavailable(describe_failure(self, OSError("NoSuchBucket")))


def location(value: Location | Path | str | None, storage_options: Mapping[str, str] | None = None,
             *, environ: Mapping[str, str] | None = None) -> Location:
    """Parse a lake location: a `Location`, a local path, or a URI (`s3://bucket/prefix`).

    `storage_options` (Lance's names) take precedence over the variables; `None` reads
    `$ELAKE_LAKE`, else `./elake-data`.
    """
    if isinstance(value, Location):
        if storage_options:
            return Location(value.uri, value.scheme, {**value.storage_options, **storage_options})
        return value
    if value is None:
        value = (os.environ if environ is None else environ).get(LAKE_ENV) or DEFAULT_LAKE
    if isinstance(value, Path):
        return Location(str(value), "file", {})
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"lake: expected a folder or a URI such as s3://bucket/prefix, not {value!r}")
    match = _URI.match(value)
    if match is None:
        return Location(value, "file", {})
    scheme = match.group(1).lower()
    if scheme == "file":
        return Location(value[len("file://"):] or "/", "file", {})
    if scheme not in REMOTE_SCHEMES:
        raise InvalidInput(f"lake: {scheme}:// is not a store the lake can use; give a local folder "
                           f"or one of {', '.join(s + '://' for s in REMOTE_SCHEMES)}")
    parts = urlsplit(value)
    if "@" in parts.netloc or parts.query or parts.fragment:
        raise InvalidInput("lake: a URI must not carry credentials, a query or a fragment; give "
                           "credentials through AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or storage_options")
    if not parts.netloc:
        raise InvalidInput(f"lake: {scheme}:// needs a bucket: {scheme}://BUCKET/PREFIX")
    uri = f"{scheme}://{parts.netloc}{parts.path}".rstrip("/")
    options = {**DEFAULT_CLIENT_OPTIONS, **storage_options_from_env(scheme, environ), **(storage_options or {})}
    return Location(uri, scheme, options)


# -- errors ------------------------------------------------------------------------------

_CAUSES = (
    (re.compile(r"NoSuchBucket|bucket.{0,40}(does not exist|not found)|specified bucket", re.I),
     "the bucket does not exist: create it first"),
    # 403 as a word: an endpoint's port (127.0.0.1:35403) in the text is not a status
    # pyarrow's S3 client spells S3's codes SIGNATURE_DOES_NOT_MATCH, ACCESS_DENIED
    (re.compile(r"Invalid_?Access_?Key_?Id|Signature_?Does_?Not_?Match|Access_?Denied|Forbidden|(?<![\d:])403\b|"
                r"ExpiredToken|InvalidToken|credentials", re.I),
     "access denied: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the storage options)"),
    (re.compile(r"error sending request|connection refused|connect error|dns error|timed out|"
                r"tcp connect|failed to lookup|unreachable|Couldn't connect|curl|"
                r"error trying to connect|connection reset|broken pipe|incomplete message", re.I),
     "the store cannot be reached"),
)


def _cause(text: str) -> str | None:
    for pattern, cause in _CAUSES:
        if pattern.search(text):
            return cause
    return None


def describe_failure(where: Location, exc: BaseException) -> str:
    """One line: the URI, what went wrong in words, and where it was (endpoint). The text of
    `exc` is not repeated when a cause is recognised; it never holds credentials anyway, but
    it does hold multi-line Rust backtraces."""
    cause = _cause(str(exc))
    endpoint = where._options.get("aws_endpoint")
    at = f" (endpoint {endpoint})" if endpoint else ""
    if cause is None:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        cause = first[:300]
    lake = re.sub(r"/[^/]+\.lance(/.*)?$", "", where.uri)  # the lake, not one of its tables
    return f"lake {lake}{at}: {cause}"


def open_timeout_s(environ: Mapping[str, str] | None = None) -> float:
    """`$ELAKE_STORE_OPEN_TIMEOUT_S`, checked: a positive number of seconds."""
    text = (os.environ if environ is None else environ).get(OPEN_TIMEOUT_ENV)
    if text is None or not text.strip():
        return DEFAULT_OPEN_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise InvalidInput(f"{OPEN_TIMEOUT_ENV}: give a number of seconds above 0, not {text!r}")
    return value


def bounded(where: Location, call: Callable[[], T], what: str) -> T:
    """`call()` (a store request made while a lake opens), given at most `open_timeout_s()`.

    The request runs on a daemon thread, since a client stuck looking for credentials cannot
    be interrupted; past the limit it is left to finish on its own (nothing it does writes)
    and `StoreSilent` names the lake, what was asked, the limit and the setting."""
    limit = open_timeout_s()
    done = threading.Event()
    result: list = []

    def run() -> None:
        try:
            result.append((True, call()))
        except BaseException as exc:  # handed to the caller's thread, raised there
            result.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name=f"store-open-{where.scheme}", daemon=True).start()
    if not done.wait(limit):
        hint = {"gs": "GOOGLE_APPLICATION_CREDENTIALS", "gcs": "GOOGLE_APPLICATION_CREDENTIALS",
                "az": "AZURE_STORAGE_ACCOUNT_NAME / AZURE_STORAGE_ACCOUNT_KEY",
                "abfs": "AZURE_STORAGE_ACCOUNT_NAME / AZURE_STORAGE_ACCOUNT_KEY",
                "abfss": "AZURE_STORAGE_ACCOUNT_NAME / AZURE_STORAGE_ACCOUNT_KEY"}.get(
                    where.scheme, "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and AWS_ENDPOINT_URL")
        silence = OSError(f"no answer within {limit:g} s while {what} ({OPEN_TIMEOUT_ENV})")
        raise StoreSilent(f"{describe_failure(where, silence)}; check the store's address and its "
                          f"credentials ({hint})")
    ok, value = result[0]
    if not ok:
        raise value
    return value


class store_errors:
    """Turn an object store's failure inside the block into `StoreUnavailable` for `where`."""

    def __init__(self, where: Location):
        self.where = where

    def __enter__(self) -> store_errors:
        return self

    def __exit__(self, exc_type, exc, tb) -> Literal[False]:  # never swallows: raises or passes
        # the product's own errors pass as they are: an `InvalidInput` is a `ValueError`, but
        # not the store's
        if exc is None or self.where.is_local or isinstance(exc, EpisodeLakeError):
            return False
        if isinstance(exc, (OSError, ValueError)) and (_cause(str(exc)) or isinstance(exc, OSError)):
            raise StoreUnavailable(describe_failure(self.where, exc)) from exc
        return False
