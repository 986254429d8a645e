"""The OpenAI-compatible client against a loopback fake server: retries, refusals, timeouts."""

from __future__ import annotations

import pytest

from episodelake.collectors.agents.model_client import (
    ModelClient,
    ModelError,
    ModelOptions,
    completions_url,
)

QUICK = ModelOptions(timeout_s=0.5, max_retries=2, backoff_s=0.01)
MESSAGES = [{"role": "user", "content": "hi"}]


def test_urls():
    assert completions_url("http://h:8000/v1/") == "http://h:8000/v1/chat/completions"
    assert completions_url("http://h/v1/chat/completions") == "http://h/v1/chat/completions"
    with pytest.raises(ModelError, match="must start with http"):
        completions_url("h:8000")


def test_answer_body_and_overrides(fake_model):
    fake_model.script("hello", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    client = ModelClient(fake_model.url, "m", api_key="k",
                         options=ModelOptions(extra_body={"top_p": 0.5}))
    assert client.complete(MESSAGES) == "hello"
    assert client.complete(MESSAGES, temperature=0.7) == "ab"
    first, second = fake_model.requests
    assert first["model"] == "m" and first["temperature"] == 0.0 and first["top_p"] == 0.5
    assert second["temperature"] == 0.7


def test_server_errors_and_timeouts_are_retried(fake_model):
    fake_model.script((503, "overloaded"), ("sleep", 1.0, "late"), "finally")
    assert ModelClient(fake_model.url, "m", options=QUICK).complete(MESSAGES) == "finally"
    assert len(fake_model.requests) == 3


def test_retries_run_out(fake_model):
    fake_model.script((500, "boom"), (500, "boom"), (500, "boom"))
    with pytest.raises(ModelError, match=r"no answer after 3 attempt\(s\), last: HTTP 500: boom"):
        ModelClient(fake_model.url, "m", options=QUICK).complete(MESSAGES)


def test_a_refused_request_is_not_retried(fake_model):
    fake_model.script((404, '{"error": "model does not exist"}'))
    with pytest.raises(ModelError, match="HTTP 404.*model does not exist.*check --model"):
        ModelClient(fake_model.url, "m", options=QUICK).complete(MESSAGES)
    assert len(fake_model.requests) == 1


def test_an_unreachable_server_names_the_check():
    client = ModelClient("http://127.0.0.1:9/v1", "m", options=QUICK)
    with pytest.raises(ModelError, match=r"ConnectError.*curl http://127.0.0.1:9/v1/models"):
        client.complete(MESSAGES)
