"""Derived columns of stored steps, computed after the write (`elake enrich`).

Recording keeps the bytes and cheap checks; what costs a decode or a model per screenshot is
a *derivation*, filled in later by `enrich`. `DERIVATIONS` is the one registry: a name, a
version, the `steps` columns it fills (declared in `lake/schema.py`) and a function from one
screenshot's bytes to their values. Adding a derivation is one entry there and its columns in
the schema.

A step is pending for a derivation while its version column does not hold the derivation's
version (or, for the write-time perceptual hash, while the column is null), so a run skips
what an earlier run stored, a changed version redoes every step, and a run stopped half way
resumes where it stopped: results are committed every `BATCH_IMAGES` screenshots. Each
distinct screenshot (by sha256) is computed once, however many steps show it. Values are
written with `lake.updates.update_columns` (Lance data evolution: only the derived columns
of the touched fragments are written, never the images or other columns). Bulk work runs in
a process pool (`workers`), one single-threaded model per process. An enrichment is a job
(kind ``enrich``, `lake.jobs`) with progress in screenshots; at the end the full-text
indexes take in the new text (`lake.search.refresh_indexes`) and the vector index the new
embeddings (`lake.similar.refresh_index`, built once there are enough of them).
"""

from __future__ import annotations

import functools
import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from episodelake.collectors.jobs.bulk import chunks
from episodelake.collectors.record.anchor import phash64
from episodelake.collectors.record.embedding import EMBEDDING_VERSION, screen_embedding
from episodelake.lake import schema
from episodelake.lake.errors import InvalidInput, LakeCorrupt
from episodelake.lake.jobs import Job
from episodelake.lake.lake import Lake
from episodelake.lake.overlay import thumbnail
from episodelake.lake.search import matching_steps, refresh_indexes
from episodelake.lake.similar import refresh_index
from episodelake.lake.updates import update_columns

#: Screenshots computed between two commits: what a stopped run can lose.
BATCH_IMAGES = 64
OCR_EXTRA = "ocr"
#: Screenshots narrower than this are read scaled up to it (at most twice their size).
OCR_MIN_SIDE = 1080


@dataclass(frozen=True)
class Derivation:
    """Columns of `steps` computed from a step's screenshot. `version_column` holds the
    version that filled a row; without one the first column being set means done (a value
    the recorder computed at write time the same way)."""

    name: str
    version: int
    columns: tuple[str, ...]
    compute: Callable[[bytes], dict[str, Any]]
    version_column: str | None = None
    help: str = ""

    def pending(self) -> str:
        """Lance filter for the steps this derivation has still to fill."""
        if self.version_column is None:
            done = f"{self.columns[0]} IS NOT NULL"
        else:
            done = f"{self.version_column} IS NOT NULL AND {self.version_column} = {self.version}"
        return f"image_sha256 IS NOT NULL AND NOT ({done})"

    def written(self) -> tuple[str, ...]:
        return self.columns + ((self.version_column,) if self.version_column else ())


def _phash(image: bytes) -> dict[str, Any]:
    return {"image_phash": phash64(image)}


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
    if pixels is None:
        return {"ocr_text": "", "ocr_boxes": []}
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


#: Every derivation `elake enrich --what` knows, in the order a run computes them.
DERIVATIONS: dict[str, Derivation] = {d.name: d for d in (
    Derivation("phash", 1, ("image_phash",), _phash,
               help="64-bit perceptual hash below the status bar (steps recorded without one)"),
    Derivation("thumbs", 1, ("thumbnail",), _thumbnail, "thumbnail_version",
               help=f"JPEG thumbnail, {schema.THUMBNAIL_SIDE} px on the long side"),
    Derivation("ocr", 1, ("ocr_text", "ocr_boxes"), _ocr, "ocr_version",
               help="the screen's text and its boxes (PP-OCRv4 through rapidocr-onnxruntime)"),
    Derivation("embed", EMBEDDING_VERSION, ("embedding",), _embed, "embedding_version",
               help=f"a {schema.EMBEDDING_DIM}-number vector of the screen, for `elake similar`"),
)}


def derivations(names: Sequence[str] | None) -> list[Derivation]:
    """The registry's entries for `names` (all when None), in registry order."""
    if names is None:
        return list(DERIVATIONS.values())
    unknown = [n for n in names if n not in DERIVATIONS]
    if unknown or not names:
        raise InvalidInput(f"what: unknown derivation(s) {unknown}; choose from {', '.join(DERIVATIONS)}")
    return [d for d in DERIVATIONS.values() if d.name in names]


def derive(name: str, image: bytes) -> dict[str, Any]:
    """One screenshot's values for derivation `name`, with its version: the unit of work of
    a pool process (it takes names, not functions, so it pickles)."""
    d = DERIVATIONS[name]
    values = d.compute(image)
    if d.version_column:
        values[d.version_column] = d.version
    return values


@dataclass
class EnrichReport:
    images: dict[str, int] = field(default_factory=dict)  # derivation -> screenshots computed
    steps: dict[str, int] = field(default_factory=dict)  # derivation -> steps filled
    indexes: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        if not any(self.steps.values()):
            return "nothing to enrich: every selected step is up to date"
        parts = [f"{name}: {self.steps[name]} step(s) from {self.images[name]} screenshot(s)"
                 for name in self.steps]
        return "enriched " + "; ".join(parts)


@dataclass
class _Pending:
    derivation: Derivation
    #: sha256 -> (a row id showing it, the keys of every pending step showing it)
    images: dict[str, tuple[int, list[tuple[str, int]]]]


def _pending(lake: Lake, d: Derivation, where: str | None) -> _Pending:
    ds = lake.dataset("steps")
    rows = ds.to_table(columns=["episode_id", "step", "image_sha256"], with_row_id=True,
                       filter=d.pending())
    keys = list(zip(rows["episode_id"].to_pylist(), rows["step"].to_pylist(), strict=True))
    allowed = None
    if where is not None:
        allowed = matching_steps(lake, where, sorted({e for e, _ in keys}))
    images: dict[str, tuple[int, list[tuple[str, int]]]] = {}
    for key, sha, rowid in zip(keys, rows["image_sha256"].to_pylist(), rows["_rowid"].to_pylist(),
                               strict=True):
        if allowed is not None and key not in allowed:
            continue
        images.setdefault(sha, (rowid, []))[1].append(key)
    return _Pending(d, images)


def enrich(lake: Lake, what: Sequence[str] | None = None, *, where: str | None = None,
           workers: int = 1, job: Job | None = None, progress: bool = False) -> EnrichReport:
    """Fill the derived columns of `what` (default all) for the steps that lack them, of
    the steps meeting `where` (an SQL condition over `episodes e JOIN steps s`) or all."""
    chosen = derivations(what)
    if workers < 1:
        raise InvalidInput(f"workers must be at least 1, not {workers}")
    lake.check_writable()
    job = job or Job(lake, "enrich", params={"what": [d.name for d in chosen], "where": where,
                                             "workers": workers})
    with job.recording():
        report = _enrich(lake, chosen, where, workers, job, progress)
        job.result = asdict(report)
    return report


def _enrich(lake: Lake, chosen: list[Derivation], where: str | None, workers: int, job: Job,
            progress: bool) -> EnrichReport:
    from tqdm import tqdm

    plans = [_pending(lake, d, where) for d in chosen]
    total = sum(len(p.images) for p in plans)
    report = EnrichReport()
    done = 0
    job.progress(0, total)
    # spawned, not forked: a fork of a process running Lance's threads can hang (Lance says so)
    pool = (ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
            if workers > 1 and total > 1 else None)
    bar = tqdm(total=total, unit="screen", desc="enrich", disable=not progress)
    try:
        for plan in plans:
            name = plan.derivation.name
            report.images[name] = report.steps[name] = 0
            bar.set_description(f"enrich {name}")
            for shas in chunks(list(plan.images), BATCH_IMAGES):
                images = _read(lake, [plan.images[s][0] for s in shas])
                compute = functools.partial(derive, name)
                values = list(pool.map(compute, images) if pool else map(compute, images))
                rows = [{"episode_id": e, "step": s, **v}
                        for sha, v in zip(shas, values, strict=True) for e, s in plan.images[sha][1]]
                update_columns(lake, "steps", _table(plan.derivation, rows))
                report.images[name] += len(shas)
                report.steps[name] += len(rows)
                done += len(shas)
                bar.update(len(shas))
                job.progress(done, total)
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    if any(report.steps.values()):
        report.indexes = refresh_indexes(lake)
        if report.steps.get("embed"):
            report.indexes["embedding"] = refresh_index(lake)
    return report


def _read(lake: Lake, rowids: list[int]) -> list[bytes]:
    blobs = lake.dataset("steps").take_blobs("image", ids=rowids)
    if any(blob is None for blob in blobs):
        raise LakeCorrupt("steps: a step with an image_sha256 has no image blob; "
                          "`elake sql \"select episode_id, step from steps where image is null and "
                          "image_sha256 is not null\"` lists them")
    return [blob.read() for blob in blobs if blob is not None]


def _table(d: Derivation, rows: list[dict]) -> pa.Table:
    names = ["episode_id", "step", *d.written()]
    return pa.Table.from_pylist(rows, schema=pa.schema([schema.STEPS.field(n) for n in names]))

