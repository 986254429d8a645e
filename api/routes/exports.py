"""Exports: start one (a background job), follow its progress, download or delete it.

POST /api/exports runs `run_export` as a job (see `episodelake.api.jobs`; the job id is the
export id) into a folder the server chooses, `<exports root>/<export_id>`. GET /api/exports
lists the `exports` table (exports made with `elake export` too) with each one's job: its
progress, and `interrupted` when the server running it died. A download zips only the folder
named by the export's stored record, and only inside the exports root: a folder chosen on
the command line is not served, whatever the record says. DELETE removes the folder (inside
the exports root only) and marks the export deleted; a running export is a 409.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

from fastapi import APIRouter, Response
from fastapi.responses import StreamingResponse

from episodelake.api.deps import IdPath, JobsDep, LakeDep, SettingsDep, WhoDep, needs
from episodelake.api.jobs import ACTIVE
from episodelake.api.models import ExportCreate, ExportDetail, ExportFormatInfo, ExportSummary
from episodelake.api.settings import Settings
from episodelake.lake.export import (
    FORMATS,
    ExportSpec,
    get_export,
    list_exports,
    new_export_id,
    run_export,
)
from episodelake.lake.export.formats import checked
from episodelake.lake.export.job import delete_export, mark_interrupted
from episodelake.lake.export.manifest import read_manifest
from episodelake.lake.storage.errors import Conflict, NotFound
from episodelake.lake.storage.lake import Lake
from episodelake.lake.storage.layout import check_id

router = APIRouter(tags=["exports"])

KIND = "export"
#: Files zipped as they are: their formats are compressed already.
STORED_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".parquet"})
CHUNK = 1 << 20


def served_folder(row: dict, settings: Settings) -> Path | None:
    """The export's folder if it lies inside the exports root, else None."""
    if not row.get("out_dir"):
        return None
    folder = Path(row["out_dir"]).resolve()
    return folder if folder.is_relative_to(settings.exports_root.resolve()) else None


def stored_error(row: dict) -> dict | None:
    """A failed export's error, recorded in its manifest column as "Type: message"."""
    text = (row.get("manifest") or {}).get("error") if row.get("status") == "failed" else None
    if not text:
        return None
    kind, _, message = text.partition(": ")
    return {"type": kind, "message": message or kind}


def export_out(row: dict, job: dict | None, settings: Settings, *, detail: bool = False) -> dict:
    """The API's view of a recorded export, with its job's progress, and the job's outcome
    where the export's own record could not say it (a server killed mid-export)."""
    manifest = row.get("manifest") or {}
    status = row["status"]
    if status == "running" and job is not None and job["status"] in ("interrupted", "cancelled"):
        status = job["status"]
    finished = status == "finished"
    out = {
        "export_id": row["export_id"], "format": row["format"], "status": status,
        "samples": row["samples"], "counts": manifest.get("counts") if finished else None,
        "selection": row["selection"], "created_at": row["created_at"], "finished_at": row["finished_at"],
        "progress": job["progress"] if job is not None else None,
        "error": (job["error"] if job is not None else None) or stored_error(row),
        "download_url": f"/api/exports/{row['export_id']}/download"
        if finished and served_folder(row, settings) is not None else None,
    }
    if detail:
        out.update(lake_versions=row["lake_versions"], manifest=manifest or None)
    return out


def pending_out(job: dict) -> dict:
    """An export job not recorded yet: still checking its input, or failed before writing."""
    return {"export_id": job["job_id"], "format": (job["params"] or {}).get("format"), "status": job["status"],
            "created_at": job["created_at"], "finished_at": job["finished_at"], "progress": job["progress"],
            "error": job["error"]}


def export_of(lake: Lake, settings: Settings, job: dict | None, export_id: str) -> dict:
    """The export's record with its job, or the job alone while it is not recorded yet."""
    try:
        row = get_export(lake, export_id)
    except NotFound:
        if job is None:
            raise
        return pending_out(job)
    return export_out(row, job, settings, detail=True)


def interrupted(lake: Lake, job: dict) -> None:
    """At start-up, for an export job whose server died: its record stops saying running."""
    try:
        mark_interrupted(lake, job["job_id"], job["error"]["message"])
    except NotFound:
        pass  # it died before recording the export


@router.get("/export-formats", response_model=list[ExportFormatInfo])
def export_formats() -> list[dict]:
    """The registered export formats (`elake export sft --list-formats` has their full docs)."""
    return [{"name": f.name, "summary": f.summary} for f in FORMATS.values()]


@router.get("/exports", response_model=list[ExportSummary])
def exports(lake: LakeDep, settings: SettingsDep, jobs: JobsDep) -> list[dict]:
    """Every recorded export, newest first, after this server's jobs not recorded yet. A
    deleted export is listed too, `status: deleted`: its files are gone, its record (what it
    selected, from which versions, its manifest) stays."""
    every = rows = list_exports(lake, include_deleted=True)
    of_kind = jobs.of_kind(KIND)
    recorded = {r["export_id"] for r in every}
    pending = [pending_out(j) for j in of_kind.values() if j["job_id"] not in recorded and j["status"] in ACTIVE]
    return pending + [export_out(r, of_kind.get(r["export_id"]), settings) for r in rows]


@router.post("/exports", response_model=ExportDetail, status_code=202)
def start_export(lake: LakeDep, settings: SettingsDep, jobs: JobsDep, body: ExportCreate,
                 who: WhoDep) -> dict:
    """Start an export; follow it at GET /api/exports/{export_id}.

    Bad input (an unknown format, set or tag, a refused `where`, an empty selection) is this
    request's error; one export runs at a time (409 while another runs)."""
    export_id = new_export_id()
    # Server exports are downloaded as a zip and unpacked elsewhere: image paths must be
    # relative to the export folder, never paths on the server.
    spec = checked(ExportSpec(out=settings.exports_root / export_id, relative_paths=True, **body.model_dump()))
    job = jobs.start(KIND, export_id, lambda job: run_export(lake, spec, job=job),
                     wait_s=settings.job_start_wait_s, params=body.model_dump(mode="json"),
                     who=who)
    return export_of(lake, settings, job, export_id)


@router.get("/exports/{export_id}", response_model=ExportDetail)
def export(lake: LakeDep, settings: SettingsDep, jobs: JobsDep, export_id: IdPath) -> dict:
    """One export: status, progress while it runs, its spec and manifest once finished."""
    check_id(export_id, "export_id")
    return export_of(lake, settings, jobs.get(export_id), export_id)


@router.delete("/exports/{export_id}", response_model=ExportDetail, openapi_extra=needs("admin"))
def delete(lake: LakeDep, settings: SettingsDep, jobs: JobsDep, export_id: IdPath) -> dict:
    """Delete an export: its folder under the exports folder goes, its record says `deleted`.

    A running export is a 409; one whose server died (`interrupted`) can be deleted. An
    export written elsewhere with `elake export --out DIR` is refused (409): its folder is
    not the server's to remove."""
    check_id(export_id, "export_id")
    job = jobs.get(export_id)
    if job is not None and job["status"] in ACTIVE:
        raise Conflict(f"export {export_id} is running: wait for it to finish (or fail) before deleting it")
    if job is not None and job["status"] in ("interrupted", "cancelled"):
        mark_interrupted(lake, export_id, job["error"]["message"] if job["error"] else job["status"])
    row = delete_export(lake, export_id, settings.exports_root)
    return export_out(row, job, settings, detail=True)


@router.get(
    "/exports/{export_id}/download",
    response_class=Response,
    responses={200: {"content": {"application/zip": {}}, "description": "the export folder as a zip"}},
)
def download(lake: LakeDep, settings: SettingsDep, export_id: IdPath) -> StreamingResponse:
    """The finished export's folder as a zip, streamed as it is built."""
    row = get_export(lake, export_id)
    if row["status"] != "finished":
        raise Conflict(f"export {export_id} is {row['status']}: only a finished export can be downloaded")
    folder = served_folder(row, settings)
    if folder is None:
        raise NotFound(f"export {export_id} was written outside this server's exports folder (with "
                       "`elake export --out`); it is not served: take it from the folder it was written to")
    manifest = read_manifest(folder)
    if manifest is None or manifest.get("status") != "complete":
        raise NotFound(f"export {export_id}: its folder is gone or was replaced; start the export again")
    return StreamingResponse(zip_stream(folder, export_id), media_type="application/zip",
                             headers={"Content-Disposition": f'attachment; filename="{export_id}.zip"'})


def folder_files(folder: Path) -> list[Path]:
    """Regular files under `folder`, sorted; symbolic links are neither followed nor zipped."""
    out = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        out += [Path(root, f) for f in files if not os.path.islink(os.path.join(root, f))]
    return sorted(out)


class _Chunks:
    """A write-only file for `ZipFile`: collects what it writes until the stream takes it.

    It has no `tell`, so `ZipFile` writes as to a pipe (sizes after each file's data), and
    the zip never has to exist whole, in memory or on disk."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:  # part of a zip file's type; ZipFile never closes a file it was given
        pass

    def take(self) -> bytes:
        out = b"".join(self.parts)
        self.parts.clear()
        return out


def zip_stream(folder: Path, root: str) -> Iterator[bytes]:
    """`folder` as a zip whose entries sit under `root/`, in pieces of about CHUNK bytes."""
    sink = _Chunks()
    with zipfile.ZipFile(sink, "w") as archive:
        for path in folder_files(folder):
            info = zipfile.ZipInfo.from_file(path, f"{root}/{path.relative_to(folder).as_posix()}")
            info.compress_type = (zipfile.ZIP_STORED if path.suffix.lower() in STORED_SUFFIXES
                                  else zipfile.ZIP_DEFLATED)
            with open(path, "rb") as src, archive.open(info, "w") as dst:
                while block := src.read(CHUNK):
                    dst.write(block)
                    if chunk := sink.take():
                        yield chunk
            if chunk := sink.take():
                yield chunk
    yield sink.take()
