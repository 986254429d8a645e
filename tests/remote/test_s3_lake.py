"""A lake on S3 (moto's real S3 API on loopback): recording, SQL, tags and time travel,
optimize, export, the trainer's batch reads, and the errors a wrong store gives."""

from __future__ import annotations

import subprocess
import sys

import pytest

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Conflict, Lake
from episodelake.lake.storage import layout
from episodelake.lake.storage.store import StoreUnavailable, describe_failure, location
from tests.factories import response, screenshot


def _record(uri, episodes=3, steps=4, prefix="ep"):
    with Recorder(uri, run_id="r1", image_checks="structure") as rec:
        for e in range(episodes):
            with rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id=f"{prefix}-{e}", group_id="g1") as ep:
                for s in range(steps):
                    ep.log_step(screenshot(s), response(), reward=0.5)
                ep.finish(success=e % 2 == 0, eval_score=1.0 if e % 2 == 0 else 0.0)


def elake(*args, env, check=True):
    proc = subprocess.run([sys.executable, "-m", "episodelake.api.cli", *args], capture_output=True,
                          text=True, timeout=300, env=env)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_record_sql_tags_time_travel_optimize_and_batch_reads(s3_lake, s3_server):
    _record(s3_lake)
    lake = Lake(s3_lake)
    assert lake.location.uri == s3_lake and not lake.location.is_local
    assert lake.sql("select count(*) n from steps")[0][0].as_py() == 12
    assert lake.sql("select count(*) n from episodes where success")[0][0].as_py() == 2
    lake.create_tag("before")
    _record(s3_lake, episodes=1, prefix="late")
    lake.invalidate()
    assert lake.sql("select count(*) from steps")[0][0].as_py() == 16
    assert lake.at("before").sql("select count(*) from steps")[0][0].as_py() == 12
    data, fmt = lake.image("ep-1", 2)
    assert data == screenshot(2) and fmt == "png"
    episodes, steps = lake.episode_batch(["ep-0", "late-0"], images=True)
    assert episodes.num_rows == 2 and steps.num_rows == 8 and steps["image"][0].as_py() == screenshot(0)
    report = lake.optimize()
    assert report["steps"]["fragments_after"] == 1
    assert lake.at("before").sql("select count(*) from steps")[0][0].as_py() == 12
    info = lake.info()
    assert info["steps"]["rows"] == 16 and info["steps"]["bytes"] > 0
    # nothing of the recording is left in the bucket but Lance datasets; the spool was local
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=s3_lake.split("/")[2])["Contents"]]
    assert all(".lance/" in k for k in keys), keys
    assert not any(layout.spool_root(s3_lake).iterdir())


def test_episode_ids_are_keys_on_s3(s3_lake):
    _record(s3_lake, episodes=1)
    with Recorder(s3_lake, image_checks="structure") as rec:
        stored = rec.start_episode("wifi_on", episode_id="ep-0")  # asks the store nothing: settled later
        held = rec.start_episode("wifi_on", episode_id="busy")
        held.log_step(screenshot(0), response())
        rec.flush()  # both claims settled: ep-0 lost (the lake holds it), busy won
        with pytest.raises(Conflict, match="the lake already holds it"):
            stored.log_step(screenshot(0), response())
        with Recorder(s3_lake, image_checks="structure") as other:
            rival = other.start_episode("wifi_on", episode_id="busy")
            other.flush()
            with pytest.raises(Conflict, match="claimed it first"):
                rival.log_step(screenshot(1), response())
        held.finish(success=True)
    lake = Lake(s3_lake)
    assert lake.sql("select count(*) from steps where episode_id = 'busy'")[0][0].as_py() == 1
    claims = lake.location / f"{layout.CLAIMS_TABLE}.lance"
    import lance

    assert lance.dataset(str(claims), storage_options=claims.storage_options).count_rows() == 0


def test_cli_sql_tag_at_export_recover_on_s3(s3_lake, s3_env, tmp_path):
    _record(s3_lake)
    assert "3" in elake("sql", "select count(*) from episodes", env=s3_env).stdout
    elake("tag", "t1", env=s3_env)
    _record(s3_lake, episodes=1, prefix="late")
    out = elake("sql", "select count(*) n from episodes", "--at", "t1", "--format", "csv", env=s3_env).stdout
    assert out.split() == ["n", "3"]
    out_dir = tmp_path / "sft"
    elake("export", "sft", "--format", "llamafactory", "--out", str(out_dir), env=s3_env)
    assert (out_dir / "dataset_info.json").exists()
    elake("recover", env=s3_env)


def test_storage_options_override_the_variables_and_stay_secret(s3_server, s3_lake, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    loc = location(s3_lake, {"aws_secret_access_key": "testing-secret"})
    assert "secret" not in repr(loc) and "secret" not in str(loc)
    lake = Lake(loc)
    assert "secret" not in repr(lake.path) and lake.sql("select count(*) from steps")[0][0].as_py() == 0


@pytest.mark.parametrize("case", ["bad endpoint", "missing bucket"])
def test_a_wrong_store_is_one_line_naming_the_uri(case, s3_server, s3_env):
    env = dict(s3_env)
    uri = env["ELAKE_LAKE"]
    if case == "bad endpoint":
        env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"
        cause = "cannot be reached"
    else:
        uri = "s3://no-such-bucket-here/lake"
        cause = "bucket does not exist"
    proc = elake("--lake", uri, "info", env=env, check=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and uri in lines[0] and cause in lines[0], proc.stderr
    assert env["AWS_SECRET_ACCESS_KEY"] not in proc.stderr
    with pytest.raises(StoreUnavailable, match=cause):
        Lake(location(uri, {"aws_endpoint": env["AWS_ENDPOINT_URL"]}))


def test_clawgui_drop_in_and_folder_import_into_s3(s3_lake, s3_env, tmp_path):
    import base64

    from episodelake.collectors import clawgui
    from episodelake.collectors.clawgui import dropin
    from tests.factories import write_reference_episode

    for n in range(3):
        clawgui.save_episode_to_json([base64.b64encode(screenshot(n)).decode()], [response()],
                                     "open wifi", "Open Wi-Fi", "dropin-1", step_number=n)  # to $ELAKE_LAKE
    assert clawgui.update_episode_result("open wifi", "dropin-1", 1.0, "done", 1.5, 3) is True
    dropin.close_recorders()
    root = tmp_path / "episodes"
    write_reference_episode(root, "task a", "imported-1", steps=3)
    assert "imported 1 episode(s), 3 step(s)" in elake("import", "clawgui", str(root), env=s3_env).stdout
    lake = Lake(s3_lake)
    got = lake.sql("select episode_id, count(*) n from steps group by 1 order by 1").to_pylist()
    assert got == [{"episode_id": "dropin-1", "n": 3}, {"episode_id": "imported-1", "n": 3}]


@pytest.mark.parametrize("text, cause", [
    ("Generic S3 error: Error after 0 retries in 1ms, max_retries:0: error sending request for url "
     "(http://127.0.0.1:35403/lake-1/lake/steps.lance/_versions): Connection refused", "cannot be reached"),
    ("Generic S3 error: request to http://127.0.0.1:4030/b failed: connection reset by peer", "cannot be reached"),
    ("Generic S3 error: Client error with status 403 Forbidden: <Code>SignatureDoesNotMatch</Code>",
     "access denied"),
    ("Object at location lake/steps.lance not found: Client error with status 403: no body", "access denied"),
])
def test_a_store_failure_is_named_by_its_cause_not_by_the_endpoint_port(text, cause):
    """An endpoint whose port holds "403" (random in tests: 127.0.0.1:35403) is unreachable, not denied."""
    where = location("s3://lake-1/lake", {"aws_endpoint": "http://127.0.0.1:35403"})
    message = describe_failure(where, OSError(text))
    prefix = "lake s3://lake-1/lake (endpoint http://127.0.0.1:35403): "
    assert message.startswith(prefix) and cause in message[len(prefix):], message
