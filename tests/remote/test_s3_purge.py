"""Purge on a lake on S3 (moto's real S3 API): afterwards no object of the bucket, listed and
read whole, holds the purged episode's screenshots, their sha256 or its goal."""

from __future__ import annotations

import hashlib

from episodelake.lake import Lake
from episodelake.lake.ops import purge
from tests.lake.ops.test_purge import GOAL, build, needles, snapshot


def objects_holding(s3_server, bucket: str, patterns: list[bytes]) -> tuple[list[str], list[str]]:
    client = s3_server.client()
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])]
    hits = []
    for key in keys:
        data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        if any(p in data for p in patterns) or any(p.decode(errors="ignore") in key for p in patterns[:3]):
            hits.append(key)
    return keys, hits


def test_purge_on_s3_leaves_no_object_holding_the_episode(s3_lake, s3_server):
    lake = Lake(s3_lake)
    victim, images, _ = build(lake)
    bucket = s3_lake.removeprefix("s3://").split("/", 1)[0]
    patterns = needles(images[victim], GOAL)
    assert objects_holding(s3_server, bucket, patterns)[1]  # the scan finds them before
    others = sorted(e for e in images if e != victim)
    before = snapshot(lake, others)

    report = purge.purge(lake, [victim])

    keys, hits = objects_holding(s3_server, bucket, patterns)
    assert hits == [] and keys
    # the proof read every object but the job's own last record (written after it)
    assert report["proof"]["files_holding"] == 0
    assert report["proof"]["files_scanned"] >= len([k for k in keys if "/jobs.lance/" not in k])
    assert report["tags_recreated"]["v1"]["steps"] > 0
    fresh = Lake(s3_lake)
    assert snapshot(fresh, others) == before
    assert hashlib.sha256(images[victim][0]).hexdigest() not in fresh.sql(
        "select image_sha256 from steps")["image_sha256"].to_pylist()
    assert fresh.at("v1").sql("select count(*) n from episodes").to_pylist() == [{"n": 3}]
