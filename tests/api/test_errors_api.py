"""The API answers a product error with the status `STATUS` gives its class and the one JSON
shape, on a real server: a device error is a gateway's status, not a storage error's."""

from __future__ import annotations

import httpx
import pytest

from episodelake.api.settings import Settings
from episodelake.lake.storage.errors import (
    ActionFailed,
    DeviceError,
    DeviceUnavailable,
    LakeCorrupt,
)
from tests.api.webapp_support import ServerThread


@pytest.mark.parametrize("error, status", [
    (DeviceUnavailable("no phone answers: plug one in and run `adb devices`"), 503),
    (DeviceError("the server said 500"), 502),
    (ActionFailed("the keyboard is missing"), 422),
    (LakeCorrupt("steps does not read"), 500),
])
def test_the_api_answers_a_product_error_with_its_status_and_the_one_shape(lake, error, status):
    srv = ServerThread(Settings(lake=lake.path, static_dir=None), lake)

    def fail() -> None:
        raise error

    # POST: the web app's catch-all route answers every GET path
    srv.server.config.app.add_api_route("/api/fail", fail, methods=["POST"])
    with srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        r = client.post("/api/fail")
    assert r.status_code == status
    assert r.json() == {"error": {"type": type(error).__name__, "message": str(error)}}
