"""The API answers a product error with the status `STATUS` gives its class and the one JSON
shape, on a real server: a device error is a gateway's status, not a storage error's."""

from __future__ import annotations

import httpx
import pytest
from pydantic import BaseModel, field_validator

from episodelake.api.settings import Settings
from episodelake.lake.storage.errors import (
    ActionFailed,
    DeviceError,
    DeviceUnavailable,
    InvalidInput,
    LakeCorrupt,
    NotFound,
)
from episodelake.lake.storage.layout import check_id
from episodelake.trainer.config import ConfigError, TrainConfig
from tests.api.webapp_support import ServerThread


@pytest.mark.parametrize("error, status", [
    (DeviceUnavailable("no phone answers: plug one in and run `adb devices`"), 503),
    (DeviceError("the server said 500"), 502),
    (ActionFailed("the keyboard is missing"), 422),
    (LakeCorrupt("steps does not read"), 500),
    # InvalidInput is also a ValueError and NotFound a LookupError: the status is still the
    # product class's (the most specific class of `STATUS` wins), and the shape the same
    (InvalidInput("reward: must be a finite number, not nan"), 422),
    (ConfigError("group_size: 1 leaves every episode without a baseline"), 422),
    (NotFound("no episode 'ep-1'"), 404),
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


class Named(BaseModel):
    """A plain request model (not a spec): FastAPI's validation errors carry its check's error."""

    name: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_id(value, "name")


def refusal(name: str) -> InvalidInput:
    try:
        check_id(name, "name")
    except InvalidInput as exc:
        return exc
    raise AssertionError(f"{name!r} is a valid id")


def test_a_check_of_a_request_model_answers_as_it_was_raised(lake):
    """A model's own check raises InvalidInput (a ValueError, which pydantic reports as a
    field's error inside the request's validation errors): the API answers with that error's
    class and message, not pydantic's wording of it."""
    srv = ServerThread(Settings(lake=lake.path, static_dir=None), lake)

    def train(config: TrainConfig) -> None:
        raise AssertionError("not reached: the body is refused")

    def named(body: Named) -> None:
        raise AssertionError("not reached: the body is refused")

    srv.server.config.app.add_api_route("/api/check", train, methods=["POST"])
    srv.server.config.app.add_api_route("/api/named", named, methods=["POST"])
    with srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        r = client.post("/api/named", json={"name": "no spaces allowed"})
        assert r.status_code == 422
        assert r.json()["error"] == {"type": "InvalidInput", "message": str(refusal("no spaces allowed"))}
        r = client.post("/api/check", json={"group_size": 1})
        assert r.status_code == 422
        error = r.json()["error"]
        assert error["type"] == "ConfigError"
        assert error["message"].startswith("group_size: 1 leaves every episode without a baseline")
        r = client.post("/api/check", json={"group_size": "many"})  # pydantic's own, worded by the spec
        assert r.status_code == 422 and r.json()["error"]["type"] == "ConfigError"
        assert r.json()["error"]["message"].startswith("group_size: input should be a valid integer")
