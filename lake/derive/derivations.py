"""Derived columns of stored steps: what is computed from a screenshot after the write.

Recording keeps the bytes and cheap checks; what costs a decode or a model per screenshot is
a *derivation*, filled in later. `DERIVATIONS` is the one registry: a name, a version, the
`steps` columns it fills (declared in `lake/storage/schema.py`) and a function from one screenshot's
bytes to their values. Registered derivations, in the order a run computes them:

- ``phash``: the perceptual hash, and the anchor key made from it for steps without one
- ``thumbs``: a JPEG thumbnail
- ``ocr``: the screen's text and its boxes
- ``embed``: a vector of the screen, for `elake similar`

Adding a derivation is one entry in `_BUILT_IN` (or a `register` call) and its columns in the
schema; `register` refuses a derivation without help text, a name already taken, and columns
the steps table does not declare.

A step is pending for a derivation while its version column does not hold the derivation's
version (or, for the perceptual hash, while the column is null), so a run skips what an
earlier run stored, a changed version redoes every step, and a run stopped half way resumes
where it stopped: results are committed every few screenshots. Each distinct screenshot (by
sha256) is computed once, however many steps show it. Values are written with
`lake.updates.update_columns` (Lance data evolution: only the derived columns of the touched
fragments are written, never the images or other columns, and commits are retried on
conflicts with concurrent writers).

A screenshot the write path's structure checks let through but a full decode refuses is
flagged, never replaced: its steps get the reason in `image_error` and no derived value.

`fill` is the work every enrichment shares: `elake enrich` (`collectors.jobs.enrich`: a job,
a process pool or Ray tasks, then the search indexes), the trainer's own batch, and the
`BackgroundEnricher` thread of a recorder or a server.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import lance
import pyarrow as pa

from episodelake.lake.curation.search import matching_steps
from episodelake.lake.derive.anchor import DEFAULT_THRESHOLD, phash64, phash_key
from episodelake.lake.derive.embedding import EMBEDDING_VERSION, screen_embedding
from episodelake.lake.derive.images import prepare_image
from episodelake.lake.ops.background import BackgroundWorker
from episodelake.lake.ops.jobs import Job
from episodelake.lake.ops.updates import update_columns
from episodelake.lake.storage import schema
from episodelake.lake.storage.errors import InvalidInput, LakeCorrupt
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.sql import sql_in
from episodelake.lake.vocab.overlay import thumbnail

log = logging.getLogger(__name__)

#: Screenshots computed between two commits: what a stopped run can lose.
BATCH_IMAGES = 64
OCR_EXTRA = "ocr"
#: Screenshots narrower than this are read scaled up to it (at most twice their size).
OCR_MIN_SIDE = 1080
#: What the recorder's and the server's background workers fill by default: the columns the
#: recorder used to compute as it wrote (the perceptual hash and the anchor key made from it).
BACKGROUND_DERIVATIONS = ("phash",)
#: How often a background worker looks for newly committed steps (it is also woken by the
#: recorder's commits).
BACKGROUND_INTERVAL_S = 2.0
#: Screenshots a background worker computes between two commits (and between two looks at
#: its stop flag, so closing a recorder waits for at most this many decodes).
BACKGROUND_BATCH_IMAGES = 8
#: Added to a background worker thread's niceness (Linux): recording keeps the CPU it needs.
BACKGROUND_NICENESS = 10


@dataclass(frozen=True)
class Derivation:
    """Columns of `steps` computed from a step's screenshot. `version_column` holds the
    version that filled a row; without one the first column being set means done (a value
    the recorder computed at write time the same way). `per_step` turns one screenshot's
    values into one step's, given the step's stored `reads` columns (the anchor key depends
    on the step, not only on its screen)."""

    name: str
    version: int
    columns: tuple[str, ...]
    compute: Callable[[bytes], dict[str, Any]]
    version_column: str | None = None
    help: str = ""
    reads: tuple[str, ...] = ()
    per_step: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None

    def pending(self) -> str:
        """Lance filter for the steps this derivation has still to fill. A screenshot a
        full decode refused (`image_error`) is never pending again: it is flagged, not retried."""
        if self.version_column is None:
            done = f"{self.columns[0]} IS NOT NULL"
        else:
            done = f"{self.version_column} IS NOT NULL AND {self.version_column} = {self.version}"
        return f"image_sha256 IS NOT NULL AND image_error IS NULL AND NOT ({done})"

    def written(self) -> tuple[str, ...]:
        return self.columns + ((self.version_column,) if self.version_column else ()) + ("image_error",)


def _phash(image: bytes) -> dict[str, Any]:
    return {"image_phash": phash64(image)}


def _anchor_key(values: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """The key the recorder's default keyer gives a step as it writes: its UI tree's when it
    has one (already stored), else its perceptual hash's. At the default threshold of 0 bits a
    cluster holds equal hashes only, so the key is a function of the hash alone and the same
    whenever and wherever it is computed; other thresholds are `elake rekey --threshold`."""
    key = stored["anchor_key"]
    if key is None and stored["ui_tree_hash"] is None and values.get("image_phash") is not None:
        key = phash_key(values["image_phash"])
    return {**values, "anchor_key": key}


if DEFAULT_THRESHOLD != 0:
    raise AssertionError("enrich's anchor keys assume the default clustering threshold is 0 bits")


def _embed(image: bytes) -> dict[str, Any]:
    return {"embedding": screen_embedding(image).tolist()}


def _thumbnail(image: bytes) -> dict[str, Any]:
    return {"thumbnail": thumbnail(image, schema.THUMBNAIL_SIDE)}


@functools.cache
def _ocr_engine() -> Any:
    """PP-OCRv4 (detection and recognition, shipped in the wheel), one thread: a process
    pool gives each core its own engine."""
    try:
        from rapidocr_onnxruntime import RapidOCR  # type: ignore[import-untyped]  # the package ships no type information
    except ImportError:
        raise InvalidInput("OCR needs the optional package rapidocr-onnxruntime: "
                           f"pip install 'episodelake[{OCR_EXTRA}]'") from None
    return RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1)


def _ocr(image: bytes) -> dict[str, Any]:
    """Text lines top to bottom, each with its box as fractions of the image."""
    import cv2
    import numpy as np

    pixels = cv2.imdecode(np.frombuffer(image, np.uint8), cv2.IMREAD_COLOR)
    if pixels is None:  # `derive` finds out why (damage is flagged, anything else raised)
        raise InvalidInput("OpenCV could not decode the screenshot")
    height, width = pixels.shape[:2]
    # Small screenshots (a 540 px wide phone) read with the spaces between words lost
    # ("Connecteddevices"); at phone resolution they come back. Boxes stay in fractions.
    scale = min(2.0, OCR_MIN_SIDE / min(height, width))
    if scale > 1:
        pixels = cv2.resize(pixels, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
        height, width = pixels.shape[:2]
    found, _ = _ocr_engine()(pixels)
    boxes = []
    for corners, text, score in found or []:
        xs, ys = [p[0] for p in corners], [p[1] for p in corners]
        boxes.append({"text": text, "x0": _frac(min(xs), width), "y0": _frac(min(ys), height),
                      "x1": _frac(max(xs), width), "y1": _frac(max(ys), height), "score": float(score)})
    boxes.sort(key=lambda b: (round(b["y0"], 2), b["x0"]))
    return {"ocr_text": "\n".join(b["text"] for b in boxes), "ocr_boxes": boxes}


def _frac(value: float, size: int) -> float:
    return min(1.0, max(0.0, float(value) / size))


_BUILT_IN = (
    Derivation("phash", 1, ("image_phash", "anchor_key"), _phash,
               help="64-bit perceptual hash below the status bar, and the anchor key made from it "
               "for steps without one (steps recorded without the hash)",
               reads=("anchor_key", "ui_tree_hash"), per_step=_anchor_key),
    Derivation("thumbs", 1, ("thumbnail",), _thumbnail, "thumbnail_version",
               help=f"JPEG thumbnail, {schema.THUMBNAIL_SIDE} px on the long side"),
    Derivation("ocr", 1, ("ocr_text", "ocr_boxes"), _ocr, "ocr_version",
               help="the screen's text and its boxes (PP-OCRv4 through rapidocr-onnxruntime)"),
    Derivation("embed", EMBEDDING_VERSION, ("embedding",), _embed, "embedding_version",
               help=f"a {schema.EMBEDDING_DIM}-number vector of the screen, for `elake similar`"),
)

#: Every derivation `elake enrich --what` knows, in the order a run computes them.
DERIVATIONS: dict[str, Derivation] = {}


def register(derivation: Derivation) -> None:
    """Add a derivation (computed after those already registered). Refused: a name already
    taken, no help text (`elake enrich --help` and the docs show it), or a column the steps
    table does not declare (declare it in `lake/storage/schema.py` first)."""
    if derivation.name in DERIVATIONS:
        raise InvalidInput(f"a derivation named {derivation.name!r} is already registered")
    if not derivation.help.strip():
        raise InvalidInput(f"derivation {derivation.name!r}: help is required")
    undeclared = [c for c in (*derivation.written(), *derivation.reads) if c not in schema.STEPS.names]
    if undeclared:
        raise InvalidInput(f"derivation {derivation.name!r}: the steps table has no column(s) "
                           f"{undeclared}; declare them in lake/storage/schema.py")
    DERIVATIONS[derivation.name] = derivation


for _derivation in _BUILT_IN:
    register(_derivation)


def derivations(names: Sequence[str] | None) -> list[Derivation]:
    """The registry's entries for `names` (all when None), in registry order."""
    if names is None:
        return list(DERIVATIONS.values())
    unknown = [n for n in names if n not in DERIVATIONS]
    if unknown or not names:
        raise InvalidInput(f"what: unknown derivation(s) {unknown}; choose from {', '.join(DERIVATIONS)}")
    return [d for d in DERIVATIONS.values() if d.name in names]


def coverage(lake: Lake, name: str) -> dict[str, int]:
    """How far derivation `name` has got over the stored steps: `screenshots` (steps with an
    image), `done` (steps holding its current version) and `pending` (steps a run would still
    compute). Whether "nothing matched" means nothing is there or nothing was computed yet."""
    d = derivations([name])[0]
    steps = lake.dataset("steps")
    screenshots = steps.count_rows(filter="image_sha256 IS NOT NULL")
    pending = steps.count_rows(filter=d.pending())
    done = (steps.count_rows(filter=f"{d.version_column} = {d.version}") if d.version_column
            else screenshots - pending)
    return {"screenshots": screenshots, "done": done, "pending": pending}


def derive(name: str, image: bytes) -> dict[str, Any]:
    """One screenshot's values for derivation `name`, with its version: the unit of work of
    a pool process (it takes names, not functions, so it pickles).

    A screenshot that fails here is decoded in full, as the recorder's `decode` check does:
    if that refuses it, the damage (which the write path's structure checks cannot see) is
    the result, `{"image_error": why}`, stored to flag the step; any other failure is raised.
    """
    d = DERIVATIONS[name]
    try:
        values = d.compute(image)
    except Exception:
        damage = decode_error(image)
        if damage is None:
            raise
        return {"image_error": damage}
    if d.version_column:
        values[d.version_column] = d.version
    return values


def decode_error(image: bytes) -> str | None:
    """Why a full decode refuses `image`, or None when it decodes whole."""
    try:
        prepare_image(image, decode=True)
    except InvalidInput as exc:
        return str(exc)
    return None


@dataclass
class EnrichReport:
    images: dict[str, int] = field(default_factory=dict)  # derivation -> screenshots computed
    steps: dict[str, int] = field(default_factory=dict)  # derivation -> steps filled
    indexes: dict[str, str] = field(default_factory=dict)
    #: steps whose screenshot a full decode refused: flagged in `image_error`, nothing derived
    damaged: int = 0
    #: the sha256 of those screenshots (for this run, not the job's record)
    flagged: set[str] = field(default_factory=set, repr=False)

    def summary(self) -> str:
        if not any(self.steps.values()) and not self.damaged:
            return "nothing to enrich: every selected step is up to date"
        parts = [f"{name}: {self.steps[name]} step(s) from {self.images[name]} screenshot(s)"
                 for name in self.steps]
        text = "enriched " + "; ".join(parts)
        if self.damaged:
            text += (f"; {self.damaged} step(s) show a damaged screenshot, flagged in image_error "
                     "(`elake sql \"select episode_id, step, image_error from steps where image_error "
                     "is not null\"` lists them)")
        return text

    def result(self) -> dict[str, Any]:
        """What a job records (the screenshots' hashes stay out)."""
        return {"images": self.images, "steps": self.steps, "indexes": self.indexes, "damaged": self.damaged}

    def add(self, other: EnrichReport) -> None:
        for name in other.steps:
            self.images[name] = self.images.get(name, 0) + other.images[name]
            self.steps[name] = self.steps.get(name, 0) + other.steps[name]
        self.damaged += other.damaged


@dataclass(frozen=True)
class Scope:
    """Which pending steps a run fills: all, or only those of some episodes, of some fragments
    of the steps table, of an SQL condition, or lacking an anchor key."""

    where: str | None = None
    episode_ids: frozenset[str] | None = None
    fragments: tuple[int, ...] | None = None
    keyless: bool = False

    def filter(self, d: Derivation) -> str:
        parts = [f"({d.pending()})"]
        if self.episode_ids is not None:
            parts.append(sql_in("episode_id", sorted(self.episode_ids)))
        if self.keyless:
            parts.append("anchor_key IS NULL")
        return " AND ".join(parts)


@dataclass
class _Pending:
    derivation: Derivation
    #: sha256 -> (a row id showing it, the pending steps showing it: their keys and `reads`)
    images: dict[str, tuple[int, list[dict[str, Any]]]]


def _pending(lake: Lake, steps: lance.LanceDataset, d: Derivation, scope: Scope) -> _Pending:
    if scope.episode_ids is not None and not scope.episode_ids or scope.fragments == ():
        return _Pending(d, {})
    fragments = None
    if scope.fragments is not None:
        fragments = [f for f in (steps.get_fragment(i) for i in scope.fragments) if f is not None]
    columns = ["episode_id", "step", "image_sha256", *d.reads]
    rows = steps.scanner(columns=columns, with_row_id=True, filter=scope.filter(d),
                         fragments=fragments).to_table()
    allowed = None
    if scope.where is not None:
        allowed = matching_steps(lake, scope.where, sorted(set(rows["episode_id"].to_pylist())))
    images: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    for row in rows.to_pylist():
        if allowed is not None and (row["episode_id"], row["step"]) not in allowed:
            continue
        sha, rowid = row.pop("image_sha256"), row.pop("_rowid")
        images.setdefault(sha, (rowid, []))[1].append(row)
    return _Pending(d, images)


def enrich_anchor_keys(lake: Lake, episode_ids: Iterable[str], *, workers: int = 1) -> EnrichReport:
    """Perceptual hashes and anchor keys for the steps of `episode_ids` that have no anchor key
    yet (recorded before a background worker reached them), `workers` screenshots at a time
    (threads: the decode runs outside the GIL). Steps keyed by their UI tree cost nothing."""
    return fill(lake, derivations(["phash"]), Scope(episode_ids=frozenset(episode_ids), keyless=True),
                workers=workers, threads=True)


#: Runs `work(part, steps)` for each part, in order (here, or as Ray tasks: `bulk.run_parts`).
PartsRunner = Callable[[Callable[..., Any], Sequence[Any], lance.LanceDataset], Iterator[Any]]


def fill(lake: Lake, chosen: list[Derivation], scope: Scope, *, workers: int = 1, threads: bool = False,
         job: Job | None = None, progress: bool = False, run: PartsRunner | None = None,
         batch_images: int | None = None, stop: threading.Event | None = None) -> EnrichReport:
    """The work of every enrichment: the pending steps of `scope`, each distinct screenshot
    computed once, committed every `batch_images` (default `BATCH_IMAGES`) screenshots.
    Screenshots are read and computed here (`workers` processes, or threads with `threads`),
    or by `run` (Ray tasks reading the lake themselves). No job record and no index refresh
    (`enrich` adds both); `stop` ends it between commits."""
    from tqdm import tqdm

    steps = lake.dataset("steps")  # one version: the row ids read below stay valid
    plans = [_pending(lake, steps, d, scope) for d in chosen]
    total = sum(len(p.images) for p in plans)
    report = EnrichReport()
    done = 0
    if job is not None:
        job.progress(0, total)
    pool: Executor | None = None
    if workers > 1 and total > 1 and run is None:
        # spawned, not forked: a fork of a process running Lance's threads can hang (Lance says so)
        pool = (ThreadPoolExecutor(workers) if threads else
                ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")))
    bar = tqdm(total=total, unit="screen", desc="enrich", disable=not progress)
    try:
        for plan in plans:
            name = plan.derivation.name
            report.images[name] = report.steps[name] = 0
            bar.set_description(f"enrich {name}")
            shas = [s for s in plan.images if s not in report.flagged]  # flagged by an earlier derivation
            done += len(plan.images) - len(shas)
            size = batch_images or BATCH_IMAGES
            parts = [(name, [plan.images[s][0] for s in shas[i:i + size]], shas[i:i + size])
                     for i in range(0, len(shas), size)]
            computed = (run(_derive_part, parts, steps) if run is not None else
                        (_derive_here(part, steps, pool) for part in parts))
            for (_, _, part_shas), values in zip(parts, computed, strict=True):
                rows = _rows(plan, part_shas, values, report)
                update_columns(lake, "steps", _table(plan.derivation, rows))
                report.images[name] += len(part_shas)
                report.steps[name] += sum(1 for row in rows if row.get("image_error") is None)
                done += len(part_shas)
                bar.update(len(part_shas))
                if job is not None:
                    job.progress(done, total)
                if stop is not None and stop.is_set():
                    return report
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return report


def _rows(plan: _Pending, shas: Sequence[str], values: list[dict[str, Any]],
          report: EnrichReport) -> list[dict[str, Any]]:
    """One update row per pending step showing each screenshot."""
    d = plan.derivation
    rows = []
    for sha, value in zip(shas, values, strict=True):
        for stored in plan.images[sha][1]:
            key = {"episode_id": stored["episode_id"], "step": stored["step"]}
            if "image_error" in value:
                log.warning("episode %s step %s: the stored screenshot does not decode (%s); "
                            "flagged in image_error", key["episode_id"], key["step"], value["image_error"])
                report.damaged += 1
                report.flagged.add(sha)
                rows.append({**key, **value})
            else:
                rows.append({**key, **(d.per_step(value, stored) if d.per_step else value)})
    return rows


def _derive_part(part: tuple[str, list[int], list[str]], steps: lance.LanceDataset) -> list[dict[str, Any]]:
    """A chunk of screenshots read and computed where this runs (a Ray task, or here)."""
    name, rowids, _ = part
    return [derive(name, image) for image in _read(steps, rowids)]


def _derive_here(part: tuple[str, list[int], list[str]], steps: lance.LanceDataset,
                 pool: Executor | None) -> list[dict[str, Any]]:
    if pool is None:
        return _derive_part(part, steps)
    name, rowids, _ = part
    return list(pool.map(functools.partial(derive, name), _read(steps, rowids)))


def _read(steps: lance.LanceDataset, rowids: list[int]) -> list[bytes]:
    blobs = steps.take_blobs("image", ids=rowids)
    if any(blob is None for blob in blobs):
        raise LakeCorrupt("steps: a step with an image_sha256 has no image blob; "
                          "`elake sql \"select episode_id, step from steps where image is null and "
                          "image_sha256 is not null\"` lists them")
    return [blob.read() for blob in blobs if blob is not None]


def _table(d: Derivation, rows: list[dict]) -> pa.Table:
    names = ["episode_id", "step", *d.written()]
    return pa.Table.from_pylist(rows, schema=pa.schema([schema.STEPS.field(n) for n in names]))


class BackgroundEnricher(BackgroundWorker):
    """Fills derived columns of newly committed steps on a thread of its own, so that the
    process recording (or serving) them never waits for a decode.

    It looks at the steps table every `interval_s` (and when woken): only once its version
    moved, and then only at fragments it has not finished with. A fragment's rows never
    change once appended (a derivation writes columns of them, a compaction makes new
    fragments), so a fragment with nothing pending stays so; looking again costs a listing.
    Values go through `fill`, written by Lance data evolution and retried on commit conflicts
    like every commit, so concurrent appends, updates and compactions lose nothing; a pass
    that fails is logged and the work stays pending for the next one. Being idempotent, two
    workers (a recorder's and a server's) at worst compute a screenshot twice.

    `episodes=True` scopes it to the episodes handed to `watch` (a recorder's own) and to
    their steps without an anchor key: what the recorder used to compute as it wrote. Steps
    keyed by their UI tree then cost nothing; their other columns are left to `elake enrich`
    or a server's worker.
    """

    name = "lake-background-enrich"
    after_failure = "its steps stay pending for the next pass"

    def __init__(self, lake: Lake, what: Sequence[str] = BACKGROUND_DERIVATIONS, *,
                 episodes: bool = False, interval_s: float = BACKGROUND_INTERVAL_S,
                 batch_images: int = BACKGROUND_BATCH_IMAGES):
        super().__init__(lake, interval_s=interval_s)
        self.chosen = derivations(list(what))
        self.scoped = episodes
        self.batch_images = batch_images
        #: everything the worker filled so far (for logs and tests)
        self.report = EnrichReport()
        self._episodes: set[str] = set()
        self._retiring: set[str] = set()
        self._finished_fragments: set[int] = set()
        self._version: int | None = None

    def watch(self, episode_id: str) -> None:
        """A scoped worker fills this episode's steps as they are committed."""
        with self._lock:
            self._episodes.add(episode_id)

    def settled(self, episode_ids: Iterable[str]) -> None:
        """These episodes are finished and committed: after the next whole pass nothing of
        theirs is left to watch."""
        with self._lock:
            self._retiring.update(episode_ids)
        self.wake()

    def _on_thread(self) -> None:
        try:  # Linux: a thread's niceness is its own; recording keeps priority over this
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                           min(19, os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICENESS))
        except (AttributeError, OSError):
            pass

    def _pass(self, woken: bool) -> None:
        with self._lock:
            retiring = set(self._retiring)
            watched = frozenset(self._episodes) if self.scoped else None
        steps = self.lake.dataset("steps")
        if steps.version != self._version and (watched is None or watched):
            fragments = tuple(f.fragment_id for f in steps.get_fragments()
                              if f.fragment_id not in self._finished_fragments)
            scope = Scope(episode_ids=watched, fragments=fragments, keyless=self.scoped)
            report = fill(self.lake, self.chosen, scope, batch_images=self.batch_images, stop=self.stopped)
            self.report.add(report)
            if self.stopped.is_set():
                return
            self._finished_fragments.update(fragments)
            self._version = steps.version if not any(report.steps.values()) else None
        with self._lock:
            self._episodes -= retiring
            self._retiring -= retiring
