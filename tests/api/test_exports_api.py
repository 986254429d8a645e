"""Exports through the API over a real server: a job that runs, reports progress and is
downloaded as a zip; bad input answered as errors naming the field; downloads that never
leave the exports folder."""

from __future__ import annotations

import io
import json
import threading
import time
import zipfile

import httpx
import pytest

from episodelake.api.jobs import Jobs
from episodelake.lake.export import ExportSpec, run_export
from episodelake.lake.export.spec import ExportOptions
from episodelake.lake.storage.errors import Conflict, InvalidInput
from tests.api.test_security import raw_get
from tests.api.webapp_support import error_of
from tests.waiting import wait_job


@pytest.fixture(scope="module")
def finished_export(server) -> dict:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        r = client.post("/api/exports", json={"format": "llamafactory", "history_images": 1, "val_fraction": 0.0})
        assert r.status_code == 202, r.text
        started = r.json()
        assert started["export_id"].startswith("exp-") and started["status"] in ("running", "finished")
        return wait_job(client, f"/api/exports/{started['export_id']}")


def test_an_export_job_finishes_with_its_manifest(client, finished_export, lake):
    assert finished_export["status"] == "finished", finished_export
    assert finished_export["format"] == "llamafactory" and finished_export["error"] is None
    # 6 successful episodes of 4 or 6 steps, one sample per step, less the duplicates (the
    # episodes of a task repeat each other) and the steps without a screenshot
    counts = finished_export["counts"]
    assert finished_export["samples"] == counts["samples"]["train"] > 0 and counts["samples"]["val"] == 0
    assert counts["samples"]["train"] + sum(counts["skipped"].values()) == 3 * (4 + 6)
    assert finished_export["manifest"]["spec"]["history_images"] == 1
    assert finished_export["selection"]["format"] == "llamafactory"
    assert finished_export["progress"] == {"done": 6, "total": 6}
    # the folder is the server's choice, inside the lake's exports folder
    folder = lake.path / "_exports" / finished_export["export_id"]
    assert (folder / "manifest.json").is_file()
    listed = {e["export_id"]: e for e in client.get("/api/exports").json()}
    assert listed[finished_export["export_id"]]["download_url"] == finished_export["download_url"]
    assert "manifest" not in listed[finished_export["export_id"]]


def test_the_download_is_a_zip_of_the_folder(client, finished_export, lake):
    r = client.get(finished_export["download_url"])
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    eid = finished_export["export_id"]
    assert f'filename="{eid}.zip"' in r.headers["content-disposition"]
    archive = zipfile.ZipFile(io.BytesIO(r.content))
    names = archive.namelist()
    assert all(n.startswith(f"{eid}/") for n in names)
    manifest = json.loads(archive.read(f"{eid}/manifest.json"))
    assert manifest == finished_export["manifest"]
    images = [n for n in names if n.startswith(f"{eid}/images/")]
    assert images and len(images) == manifest["counts"]["images"]
    assert all(archive.read(n)[:8] == b"\x89PNG\r\n\x1a\n" for n in images)
    assert archive.getinfo(images[0]).compress_type == zipfile.ZIP_STORED  # PNGs are not recompressed
    # the dataset names its images relative to the folder, so the unpacked zip trains anywhere
    data_files = [n for n in names if n.endswith(".jsonl")]
    referenced = {path for n in data_files for line in archive.read(n).decode().splitlines()
                  for path in json.loads(line)["images"]}
    assert referenced and all(not path.startswith("/") and f"{eid}/{path}" in names for path in referenced)
    folder = lake.path / "_exports" / eid
    for name in names:
        assert archive.read(name) == (folder / name.split("/", 1)[1]).read_bytes()


def test_unknown_format_and_bad_fields_are_named(client):
    r = client.post("/api/exports", json={"format": "csv"})
    assert r.status_code == 422 and error_of(r)["type"] == "UnknownFormat"
    assert "format" in error_of(r)["message"] and "llamafactory" in error_of(r)["message"]
    for body, field in [({"format": "swift", "val_fraction": 1.5}, "val_fraction"),
                        ({"format": "swift", "granularity": "page"}, "granularity"),
                        ({"format": "swift", "out": "/tmp/mine"}, "out"),
                        ({"format": "swift", "tag": "../x"}, "tag"),
                        ({"format": "swift", "granularity": "episode", "style": "gui-owl"}, "style")]:
        r = client.post("/api/exports", json=body)
        assert r.status_code == 422 and field in error_of(r)["message"], (body, r.text)


def test_empty_or_missing_selection_is_the_requests_error(client):
    r = client.post("/api/exports", json={"format": "swift", "where": "task_name = 'no-such-task'"})
    assert r.status_code == 404 and error_of(r)["type"] == "EmptySelection"
    assert "no-such-task" in error_of(r)["message"]
    r = client.post("/api/exports", json={"format": "swift", "set": "no-such-set"})
    assert r.status_code == 404 and "no-such-set" in error_of(r)["message"]
    r = client.post("/api/exports", json={"format": "swift", "where": "1; drop table steps"})
    assert r.status_code == 400 and error_of(r)["type"] == "SqlRefused" and "where" in error_of(r)["message"]
    # refused starts leave no job behind (jobs not recorded yet show without a format)
    assert all(e["format"] is not None for e in client.get("/api/exports").json())


@pytest.mark.parametrize("path", [
    "/api/exports/..%2F..%2Fetc%2Fpasswd/download",
    "/api/exports/../../etc/passwd/download",
    "/api/exports/%2e%2e/download",
    "/api/exports/exp-..%5C..%5Csecret/download",
    "/api/exports/exp-1%00/download",
])
def test_a_path_looking_export_id_is_refused(server, path):
    status, body = raw_get(server.host, server.port, path)
    assert status in (404, 422), (path, status)
    assert set(json.loads(body)) == {"error"}


def test_unknown_ids_and_unfinished_exports(client, lake):
    r = client.get("/api/exports/exp-000000000000/download")
    assert r.status_code == 404 and "exp-000000000000" in error_of(r)["message"]
    r = client.get("/api/exports/exp..1")
    assert r.status_code == 422 and "export_id" in error_of(r)["message"]
    lake.upsert("exports", [{"export_id": "exp-failed", "format": "swift", "status": "failed",
                             "out_dir": str(lake.path / "_exports" / "exp-failed"),
                             "manifest": json.dumps({"error": "EmptySelection: no sample was kept"})}])
    failed = client.get("/api/exports/exp-failed").json()
    assert failed["error"] == {"type": "EmptySelection", "message": "no sample was kept"}
    assert failed["download_url"] is None
    r = client.get("/api/exports/exp-failed/download")
    assert r.status_code == 409 and "failed" in error_of(r)["message"]


def test_an_export_written_elsewhere_is_listed_but_not_served(client, lake, tmp_path):
    result = run_export(lake, ExportSpec(format="swift", out=tmp_path / "mine"))
    listed = {e["export_id"]: e for e in client.get("/api/exports").json()}
    assert listed[result.export_id]["status"] == "finished" and listed[result.export_id]["download_url"] is None
    r = client.get(f"/api/exports/{result.export_id}/download")
    assert r.status_code == 404 and "elake export --out" in error_of(r)["message"]


def test_one_job_of_a_kind_at_a_time(lake):
    jobs, release = Jobs(lake), threading.Event()
    jobs.open()

    def work(job):
        job.progress(0, 1)
        release.wait(10)

    first = jobs.start("export", "exp-a", work, wait_s=5)
    assert first["status"] == "running" and first["progress"] == {"done": 0, "total": 1}
    with pytest.raises(Conflict, match="exp-a is running"):
        jobs.start("export", "exp-b", work, wait_s=5)
    assert jobs.start("rerun", "rerun-a", lambda progress: None, wait_s=5)["status"] == "done"
    release.set()
    jobs.stop(timeout_s=5)
    assert jobs.get("exp-a")["status"] == "done"
    assert jobs.start("export", "exp-c", lambda progress: None, wait_s=5)


def test_stopping_interrupts_a_running_job_at_its_next_report(lake):
    jobs = Jobs(lake)
    jobs.open()

    def work(job):
        job.progress(0, 2)
        for _ in range(1000):
            time.sleep(0.01)
            job.progress(1, 2)

    assert jobs.start("export", "exp-s", work, wait_s=5)["status"] == "running"
    jobs.stop(10)
    job = jobs.get("exp-s")
    assert job["status"] == "interrupted" and job["error"]["type"] == "Interrupted"
    assert "server stopped" in job["error"]["message"] and job["finished_at"] is not None


# -- the request body is the export spec ------------------------------------------------------
def test_the_request_body_is_the_export_spec_with_its_constraints(client):
    """POST /api/exports takes `ExportOptions` itself: OpenAPI shows the spec's own types,
    ranges and descriptions (nothing restated), and only `out`/`relative_paths`, which the
    server decides, are not the caller's."""
    doc = client.get("/openapi.json").json()
    body = doc["paths"]["/api/exports"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    schema = doc["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
    model = {name: {k: v for k, v in prop.items() if not (k == "default" and v is None)}
             for name, prop in ExportOptions.model_json_schema(
                 ref_template="#/components/schemas/{model}")["properties"].items()}
    assert schema["properties"] == model  # OpenAPI leaves out null defaults
    assert schema["additionalProperties"] is False
    # the server decides the folder and reads no file a caller names (rules come inline)
    assert set(ExportSpec.model_fields) - set(schema["properties"]) == {"out", "relative_paths", "redact_config"}
    for name, field in ExportOptions.model_fields.items():
        assert len(field.description or "") > 10 and schema["properties"][name]["description"] == field.description
    props = schema["properties"]
    assert (props["history_images"]["minimum"], props["history_images"]["maximum"]) == (0, 100)
    assert props["val_fraction"]["exclusiveMaximum"] == 1 and props["where"]["anyOf"][0]["maxLength"] == 4000
    assert props["max_pixels"]["anyOf"][0]["minimum"] == 64 * 64
    assert props["granularity"]["enum"] == ["step", "episode"] and props["history_images"]["default"] == 3


def test_a_combination_is_refused_with_the_same_message_as_in_python(client, tmp_path):
    bad = {"format": "swift", "granularity": "episode", "good_steps_only": True}
    with pytest.raises(InvalidInput) as caught:
        ExportSpec(out=tmp_path, **bad)
    r = client.post("/api/exports", json=bad)
    assert r.status_code == 422 and error_of(r) == {"type": "InvalidInput", "message": str(caught.value)}
    r = client.post("/api/exports", json={"format": "openai", "max_images": 11})
    assert r.status_code == 422 and "openai accepts at most 10 images" in error_of(r)["message"]
