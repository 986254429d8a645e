"""`run_export`: one export from spec to finished folder, recorded in the `exports` table.

Order of work: check the format, resolve the selection (fails early, writing nothing),
check that a redacting export can read the text on every screenshot, claim the folder,
then stream episode by episode: build samples, drop duplicates, route each
to its task's split, hand it to the format's writer (which pulls images as it needs them).
Callers that show progress (the CLI's bar, the API's job status) pass `progress(done,
total)`, called once with done = 0 when the selection is resolved and the folder claimed,
then after each episode.

An export's record moves running -> finished | failed, and its job (`episodelake.lake.ops.jobs`,
the one record of status, progress and who, same id) with it. A process that dies
mid-export leaves the record running; its job reads `interrupted` at once, and the next
server marks the record so too (`mark_interrupted`); `delete_export`
removes a finished, failed or interrupted export's folder and marks it `deleted` (the row
stays, so the lake still says what was exported and when).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import lance

from episodelake.lake.curation.redact import Redactor
from episodelake.lake.curation.similar import NearDuplicates
from episodelake.lake.export import manifest as manifest_mod
from episodelake.lake.export.base import SPLITS, WriteContext
from episodelake.lake.export.errors import EmptySelection
from episodelake.lake.export.formats import checked, get_format
from episodelake.lake.export.images import IMAGE_DIR, ExportImage, ImageStore, load_images
from episodelake.lake.export.samples import Sample, samples
from episodelake.lake.export.selection import EpisodeSteps, Selection, select
from episodelake.lake.export.spec import ExportSpec
from episodelake.lake.export.split import Dedup, split_of
from episodelake.lake.ops import lineage
from episodelake.lake.ops.jobs import Job
from episodelake.lake.storage.errors import Conflict, NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.layout import check_id

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


@dataclass
class PreparedEpisode:
    """One selected episode made ready to write: its samples in order, what was left out
    and why, and (when they were read ahead, e.g. on another node) its screenshots as
    exported; None reads them when a format first asks. `texts`: when redacting, what was
    masked in the text the samples were built from (see `redact_text`)."""

    episode: EpisodeSteps
    samples: list[Sample]
    skipped: Counter
    images: dict[str, ExportImage] | None = None
    texts: list[dict] = field(default_factory=list)


#: Turns the selection into prepared episodes, in the selection's order. The export's
#: result depends only on that order, so the work may run anywhere (`prepare_here` runs it
#: in this process; a cluster runner reads and builds episodes in parallel).
Prepare = Callable[[Selection, ExportSpec], Iterable[PreparedEpisode]]


def prepare_episode(episode: EpisodeSteps, spec: ExportSpec,
                    steps: lance.LanceDataset | None = None) -> PreparedEpisode:
    """The episode's samples; with `steps` (the selection's version of the steps table),
    its screenshots too, read only when a sample was kept."""
    skipped: Counter = Counter()
    redactor = spec.redactor()
    texts: list[dict] = []
    if redactor is not None:
        episode, texts = redact_text(episode, redactor)
    kept = list(samples(episode, spec, skipped))
    if redactor is not None:
        kept = _checkable(episode, kept, skipped)
    images = load_images(steps, episode, spec.max_pixels, redactor) if steps is not None and kept else None
    return PreparedEpisode(episode, kept, skipped, images, texts)


#: The step columns whose text samples carry (the response holds the model's thinking; the
#: action's text shows in later steps' history lines), masked by a redacting export. The
#: stored JSON `action` is masked string by string.
STEP_TEXT = ("model_response", "action")


def redact_text(episode: EpisodeSteps, redactor: Redactor) -> tuple[EpisodeSteps, list[dict]]:
    """The episode with personal data masked in its goal and its steps' `STEP_TEXT`, before
    any sample is built from them, so no format can write it; and one record per masked
    field (episode, step, field, rule -> matches; null step for the goal). The rows are
    copies: the lake and the selection keep the originals."""
    records = []
    goal, rules = redactor.mask_text(episode.task_goal)
    if rules:
        records.append(_text_record(episode.episode_id, None, "task_goal", rules))
    steps = []
    for row in episode.steps:
        masked = dict(row)
        for column in STEP_TEXT:
            if row.get(column):
                mask = redactor.mask_json if column == "action" else redactor.mask_text
                masked[column], rules = mask(row[column])
                if rules:
                    records.append(_text_record(episode.episode_id, row["step"], column, rules))
        steps.append(masked)
    return dataclasses.replace(episode, task_goal=goal, steps=steps), records


def _text_record(episode_id: str, step: int | None, column: str, rules: list[str]) -> dict:
    return {"episode_id": episode_id, "step": step, "field": column, "rules": dict(sorted(Counter(rules).items()))}


def _checkable(episode: EpisodeSteps, kept: list[Sample], skipped: Counter) -> list[Sample]:
    """The samples whose every screenshot has text to redact by; the others are counted as
    skipped (only `redact_missing="skip"` gets here with any: "fail" refused the export)."""
    unread = unread_screenshots(episode.steps)
    if not unread:
        return kept
    checkable = []
    for sample in kept:
        if unread.intersection(sample.images):
            skipped["no_text_to_redact"] += 1
        else:
            checkable.append(sample)
    return checkable


def unread_screenshots(steps: Iterable[dict]) -> set[str]:
    """The screenshots (sha256) among `steps` whose text no step has read: OCR reads each
    distinct screenshot once, so one step's text serves every step showing the same bytes."""
    shown, read = set(), set()
    for row in steps:
        if row["image_sha256"]:
            shown.add(row["image_sha256"])
            if row["ocr_version"] is not None:
                read.add(row["image_sha256"])
    return shown - read


def check_text(selection: Selection, spec: ExportSpec) -> None:
    """Refuse, before anything is written, a redacting export of screenshots whose text was
    never read: their personal data could not be found, and they would leave unmasked."""
    if not spec.redact or spec.redact_missing != "fail":
        return
    rows = [row for episode in selection.episodes for row in episode.steps]
    unread = len(unread_screenshots(rows))
    if unread:
        shots = len({row["image_sha256"] for row in rows if row["image_sha256"]})
        raise Conflict(f"redact: {unread} of {shots} screenshots of the selected episodes have no "
                       "OCR text, so the personal data on them cannot be found; run `elake enrich "
                       "--what ocr` first (it reads only the screenshots not read yet), or pass "
                       "--redact-missing skip to leave out the samples that show them")


def prepare_here(selection: Selection, spec: ExportSpec) -> Iterator[PreparedEpisode]:
    return (prepare_episode(episode, spec) for episode in selection.episodes)


@dataclass(frozen=True)
class ExportResult:
    export_id: str
    out: Path
    manifest: dict

    @property
    def samples(self) -> dict[str, int]:
        """Records per split as the files hold them, in `counts.unit` (pairs for dpo, episode
        folders for clawgui, samples for the others)."""
        return self.manifest["counts"]["samples"]


def _record(lake: Lake, row: dict) -> None:
    lake.upsert("exports", [row])


def new_export_id() -> str:
    return f"exp-{uuid.uuid4().hex[:12]}"


def run_export(lake: Lake, spec: ExportSpec, progress: Progress | None = None, *,
               job: Job | None = None, prepare: Prepare = prepare_here) -> ExportResult:
    """Export `spec` from `lake` (writable: the export is recorded in it). Raises an
    `EpisodeLakeError` for bad input before anything is written.

    The export is a job (`episodelake.lake.ops.jobs`) whose id is the export's: `job` lets a
    caller that runs it (the API, which names the folder after the id) make it first; by
    default a new one is made. `prepare` says where samples are built and images read (see
    `Prepare`); the files written are the same wherever that is."""
    spec = checked(spec)
    job = (job or Job(lake, "export", job_id=new_export_id(), params=spec.recorded())).listen(progress)
    with job.recording():
        result = _export(lake, spec, job, prepare)
        job.result = {"samples": result.samples, "out": str(result.out)}
    return result


def _export(lake: Lake, spec: ExportSpec, job: Job, prepare: Prepare) -> ExportResult:
    fmt = get_format(spec.format)
    selection = select(lake, spec)
    check_text(selection, spec)
    out = spec.out.resolve()
    manifest_mod.prepare_folder(out)
    row = {"export_id": job.job_id, "format": fmt.name,
           "selection": json.dumps({**spec.recorded(), **selection.recorded()}, sort_keys=True),
           "lake_versions": json.dumps(selection.versions, sort_keys=True), "out_dir": str(out),
           "status": "running", "created_at": datetime.now(UTC)}
    _record(lake, row)
    try:
        doc = _write(out, spec, fmt, selection, job.progress, prepare)
    except BaseException as exc:
        _record(lake, {**row, "status": "failed", "finished_at": datetime.now(UTC),
                       "manifest": json.dumps({"error": f"{type(exc).__name__}: {exc}"})})
        raise
    _record(lake, {**row, "status": "finished", "finished_at": datetime.now(UTC),
                   "samples": sum(doc["counts"]["samples"].values()),
                   "manifest": json.dumps(doc, sort_keys=True)})
    lineage.record(lake, "export", job.job_id, tag=selection.tag, lake_versions=selection.versions,
                   selection={**spec.recorded(), **selection.recorded()}, counts=doc["counts"],
                   episode_ids=[ep.episode_id for ep in selection.episodes])
    log.info("export %s: %s %s to %s", job.job_id, doc["counts"]["samples"], doc["counts"]["unit"], out)
    return ExportResult(job.job_id, out, doc)


def _write(out: Path, spec: ExportSpec, fmt, selection: Selection, progress: Progress | None,
           prepare: Prepare) -> dict:
    store = ImageStore(selection.source, out, spec.max_pixels, spec.redactor())
    writer = fmt.open(WriteContext(out, spec, store, selection.source))
    dedup = Dedup(spec.dedup)
    near = None
    if spec.dedupe_similar is not None:  # near-duplicate screens of a task: see lake.similar
        near = NearDuplicates(selection.source, spec.dedupe_similar)
        near.load(ep.episode_id for ep in selection.episodes)
    skipped: Counter = Counter()
    counts = dict.fromkeys(SPLITS, 0)
    tasks: dict[str, set[str]] = {s: set() for s in SPLITS}
    images: set[str] = set()
    texts: list[dict] = []  # text masked in the episodes that went out
    episodes = 0
    total = len(selection.episodes)
    if progress is not None:
        progress(0, total)
    for done, prepared in enumerate(prepare(selection, spec), 1):
        ep = prepared.episode
        store.begin(ep, prepared.images)
        skipped.update(prepared.skipped)
        split = split_of(ep.task_name, spec.seed, spec.val_fraction)
        kept = 0
        for sample in prepared.samples:
            if dedup.seen(sample.key):
                skipped["duplicate"] += 1
                continue
            if near is not None and near.seen(ep.task_name, ep.episode_id, sample.step):
                skipped["near_duplicate"] += 1
                continue
            writer.write(split, sample)
            images.update(sample.images)
            kept += 1
        if kept:
            counts[split] += kept
            tasks[split].add(ep.task_name)
            texts += prepared.texts
            episodes += 1
        if progress is not None:
            progress(done, total)
    entries = writer.close()
    if not any(counts.values()):
        reasons = ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in sorted(skipped.items()))
        raise EmptySelection(f"selection: {total} episode(s) matched but no sample was kept ({reasons})")
    # what the files hold, in the format's unit (pairs for dpo, episode folders for clawgui);
    # a format registered without `records` writes one record per sample it is given
    records = writer.records() if hasattr(writer, "records") else dict(counts)
    if store.files_written:
        entries.append(IMAGE_DIR)
    files = {name: manifest_mod.file_entry(out / name) for name in sorted(entries) if (out / name).is_file()}
    body = {
        "status": "complete",
        "format": fmt.name,
        "spec": spec.recorded(),
        "source": selection.recorded(),
        "counts": {"episodes": episodes, "samples": {s: records.get(s, 0) for s in SPLITS},
                   "unit": fmt.unit, "images": len(images), "skipped": dict(sorted(skipped.items())),
                   **({} if fmt.unit == "samples" else {"step_samples": counts})},
        "tasks": {s: sorted(t) for s, t in tasks.items()},
        "entries": sorted(entries),
        "files": files,
    }
    if spec.redact:
        masked: Counter[str] = Counter()
        for record in texts:
            masked.update(record["rules"])
        body["redaction"] = {"rules": spec.recorded()["redact_rules"], "missing": spec.redact_missing,
                             **store.redaction(images), "texts": texts,
                             "text_matches": dict(sorted(masked.items()))}
    return manifest_mod.write_manifest(out, body)


def _parsed(row: dict) -> dict:
    for key in ("selection", "lake_versions", "manifest"):
        row[key] = json.loads(row[key]) if row[key] else None
    return row


def list_exports(lake: Lake, *, include_deleted: bool = False) -> list[dict]:
    """Every recorded export, newest first, with its selection and manifest parsed; deleted
    ones only when asked."""
    where = "" if include_deleted else "WHERE status IS DISTINCT FROM 'deleted' "
    return [_parsed(row) for row in
            lake.sql(f"SELECT * FROM exports {where}ORDER BY created_at DESC, export_id").to_pylist()]


def get_export(lake: Lake, export_id: str) -> dict:
    """One recorded export, parsed as `list_exports` does."""
    check_id(export_id, "export_id")
    rows = lake.sql("SELECT * FROM exports WHERE export_id = ?", [export_id]).to_pylist()
    if not rows:
        raise NotFound(f"no export {export_id!r}; `elake sql \"select export_id, status from exports\"` lists them")
    return _parsed(rows[0])


def _stored(row: dict) -> dict:
    """A parsed row back in the table's shape."""
    return {**row, **{k: json.dumps(row[k], sort_keys=True) if row[k] is not None else None
                      for k in ("selection", "lake_versions", "manifest")}}


def mark_interrupted(lake: Lake, export_id: str, reason: str) -> dict:
    """Record that a running export will never finish (its process died); returns the row."""
    row = get_export(lake, export_id)
    if row["status"] != "running":
        return row
    row = {**row, "status": "interrupted", "finished_at": datetime.now(UTC),
           "manifest": {"error": f"Interrupted: {reason}"}}
    _record(lake, _stored(row))
    return row


def delete_export(lake: Lake, export_id: str, root: Path) -> dict:
    """Remove the export's folder (only inside `root`, the exports folder) and mark its
    record `deleted`; returns the updated record. A running export is a `Conflict`; one
    written elsewhere (`elake export --out DIR`) is refused, its folder is not ours to delete."""
    row = get_export(lake, export_id)
    if row["status"] == "running":
        raise Conflict(f"export {export_id} is running: wait for it to finish (or fail) before deleting it")
    if row["status"] == "deleted":
        return row
    root = root.resolve()
    folder = Path(row["out_dir"]).resolve() if row.get("out_dir") else None
    if folder is not None and not folder.is_relative_to(root):
        raise Conflict(f"export {export_id} was written to {folder}, outside the exports folder {root}: "
                       "it is not deleted from here; remove that folder yourself")
    if folder is not None and folder != root and folder.exists():
        shutil.rmtree(folder)
    row = {**row, "status": "deleted"}
    _record(lake, _stored(row))
    log.info("export %s deleted (%s)", export_id, folder)
    return row
