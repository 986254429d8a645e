"""The S3 test server itself: a bucket per test, the variables set, the proxy that blocks."""

import time

import lance
import pyarrow as pa
import pytest


def _options(env):
    return {"aws_endpoint": env["AWS_ENDPOINT_URL"], "aws_access_key_id": env["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"], "aws_region": env["AWS_REGION"],
            "allow_http": "true"}


def test_fixture_gives_a_fresh_bucket_and_the_proxy_blocks(s3_server, s3_proxied_lake, s3_proxy, s3_env):
    uri = s3_proxied_lake + "/t.lance"
    opts = _options(s3_env)
    lance.write_dataset(pa.table({"a": [1, 2]}), uri, storage_options=opts)
    assert lance.dataset(uri, storage_options=opts).count_rows() == 2
    with s3_proxy.blocked(), pytest.raises((OSError, ValueError)):
        lance.dataset(uri, storage_options={**opts, "client_max_retries": "0",
                                            "connect_timeout": "1s", "timeout": "2s"}).count_rows()
    assert lance.dataset(uri, storage_options=opts).count_rows() == 2


def test_the_proxy_can_give_the_store_a_latency(s3_server):
    """A delaying proxy (the remote benchmark's `--store-latency-ms`) adds its delay to each
    request and still forwards the real S3 API."""
    from tests.remote.proxy import TcpProxy

    direct, delayed = s3_server.client(), None
    proxy = TcpProxy(s3_server.port, delay_s=0.1)
    try:
        delayed = s3_server.client(proxy.endpoint)
        bucket = s3_server.new_bucket()
        delayed.put_object(Bucket=bucket, Key="k", Body=b"v")
        started = time.monotonic()
        for _ in range(3):
            assert delayed.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
        took = time.monotonic() - started
        assert took >= 0.3, took
        assert direct.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
        assert len([m for m, _ in proxy.requests if m == "GET"]) == 3
    finally:
        proxy.close()
