"""A real S3 API on loopback for the remote-lake tests: moto's standalone server.

How to use it in a test module under tests/remote/:

```python
def test_something(s3_lake):            # "s3://<fresh bucket>/lake", env already set
    lake = Lake(s3_lake)                 # Lance talks S3 to the moto server
    ...

def test_in_subprocess(s3_lake, s3_env):
    subprocess.run([...], env=s3_env)    # os.environ plus AWS_* for the server (and ELAKE_LAKE)

def test_outage(s3_proxied_lake, s3_proxy):
    ...                                  # the lake reached through a TCP proxy
    with s3_proxy.blocked():             # the store is unreachable (connections refused/cut)
        ...
```

- `s3_server` (session): `python -m moto.server` on a free port of 127.0.0.1, started once,
  waited for until it answers, stopped at the end (`s3_server.S3Server`, which the remote
  benchmark starts too). `.endpoint`, `.client()` (boto3),
  `.new_bucket()`.
- `s3_lake` (function): a fresh bucket per test; `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
  `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP` and `ELAKE_LAKE` are set for the
  test (monkeypatch) and the lake URI is returned. `ELAKE_SPOOL` points at the test's
  tmp_path, so spools of different tests never meet.
- `s3_env`: a copy of `os.environ` with the same variables, for subprocesses (Ray workers too).
- `s3_proxy` / `s3_proxied_lake`: the same server behind a TCP proxy the test can block
  (new connections are refused and open ones cut), for "the store went away" cases with the
  real S3 API behind it and nothing of ours mocked; `s3_proxy.sent` counts the bytes sent to
  the store (did a call ask it anything?) and `s3_proxy.requests` lists the HTTP requests,
  as (method, target), in the order they arrived (how many did opening a lake take?);
  `s3_proxy.refusing(lambda method, target: method == "PUT")` cuts the requests it matches
  (reads work, writes fail).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.remote.proxy import TcpProxy
from tests.remote.s3_server import S3Server


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> S3Server:
    server = S3Server(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.stop()


def _lake_env(monkeypatch, tmp_path: Path, env: dict[str, str], uri: str) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ELAKE_LAKE", uri)
    monkeypatch.setenv("ELAKE_SPOOL", str(tmp_path / "spool"))


@pytest.fixture
def s3_lake(s3_server, monkeypatch, tmp_path) -> str:
    uri = f"s3://{s3_server.new_bucket()}/lake"
    _lake_env(monkeypatch, tmp_path, s3_server.env(), uri)
    return uri


@pytest.fixture
def s3_env(request) -> dict[str, str]:
    """os.environ as the test's lake fixture set it (AWS_*, ELAKE_LAKE, ELAKE_SPOOL), for
    subprocesses: `s3_proxied_lake`'s when the test uses it, else `s3_lake`'s."""
    proxied = "s3_proxied_lake" in request.fixturenames
    request.getfixturevalue("s3_proxied_lake" if proxied else "s3_lake")
    return dict(os.environ)


@pytest.fixture
def s3_proxy(s3_server) -> TcpProxy:
    proxy = TcpProxy(s3_server.port)
    yield proxy
    proxy.close()


@pytest.fixture
def s3_proxied_lake(s3_server, s3_proxy, monkeypatch, tmp_path) -> str:
    """A fresh bucket's lake, reached through `s3_proxy` (env set like `s3_lake`)."""
    uri = f"s3://{s3_server.new_bucket()}/lake"
    _lake_env(monkeypatch, tmp_path, s3_server.env(s3_proxy.endpoint), uri)
    return uri


@pytest.fixture
def ray_on_s3(s3_lake) -> Iterator[str]:
    """A local Ray cluster started with the S3 lake's variables set (workers read the store
    with them), the tests' Ray support module shipped to the workers by value."""
    import ray

    from tests.remote import ray_cluster

    ray.shutdown()  # a cluster of another module started without the S3 variables
    ray.cloudpickle.register_pickle_by_value(ray_cluster)
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    try:
        yield s3_lake
    finally:
        ray.shutdown()
