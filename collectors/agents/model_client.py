"""A client for OpenAI-compatible chat completions servers (vLLM ``serve``, SGLang, OpenAI).

Agents and the step-reward judge both talk to such servers; this is the one place that knows
the wire format, the retry policy and the timeouts. Screenshots travel inline as base64 data
URLs (:func:`~episodelake.lake.vocab.prompts.data_url_part`), so the server needs no access
to our files.

Retried, with jittered exponential backoff: connection errors, timeouts, HTTP 429 and 5xx.
Not retried: other 4xx (a wrong model name, a prompt too long), which no retry can fix; the
error carries the server's message.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from episodelake.lake.storage.errors import EpisodeLakeError, InvalidInput

log = logging.getLogger(__name__)


class ModelError(EpisodeLakeError):
    """The model server could not give an answer (after retries, or a request it refused)."""


@dataclass(frozen=True)
class ModelOptions:
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    max_retries: int = 3
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    temperature: float = 0.0
    max_tokens: int | None = 1024
    #: Merged into every request body, e.g. ``{"chat_template_kwargs": {"enable_thinking":
    #: False}}`` for vLLM or ``{"top_p": 0.9}``.
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise InvalidInput("timeouts must be positive")
        if self.max_retries < 0:
            raise InvalidInput(f"max_retries must be >= 0, got {self.max_retries}")


def completions_url(base_url: str) -> str:
    """The chat completions endpoint for a base URL as OpenAI clients take it
    (``http://host:8000/v1``); a full ``.../chat/completions`` URL is kept as is."""
    url = base_url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ModelError(f"model URL {base_url!r} must start with http:// or https://, e.g. "
                         "http://127.0.0.1:8000/v1")
    return url if url.endswith("/chat/completions") else f"{url}/chat/completions"


class ModelClient:
    """``complete(messages) -> text`` against one model on one server."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 options: ModelOptions | None = None):
        self.url = completions_url(base_url)
        self.model = model
        self.options = options or ModelOptions()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        timeout = httpx.Timeout(self.options.timeout_s, connect=self.options.connect_timeout_s)
        self._http = httpx.Client(headers=headers, timeout=timeout)

    def complete(self, messages: list[dict[str, Any]], **overrides: Any) -> str:
        """The assistant's text for `messages`; `overrides` replace body fields (temperature...)."""
        body: dict[str, Any] = {"model": self.model, "messages": messages,
                                "temperature": self.options.temperature}
        if self.options.max_tokens is not None:
            body["max_tokens"] = self.options.max_tokens
        body.update(self.options.extra_body)
        body.update(overrides)
        return _message_text(self._post(body), self.url)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        opts = self.options
        delay = opts.backoff_s
        for attempt in range(opts.max_retries + 1):
            last = attempt == opts.max_retries
            try:
                response = self._http.post(self.url, json=body)
            except httpx.TransportError as exc:  # connect errors, timeouts, dropped connections
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    try:
                        return response.json()
                    except ValueError:
                        problem = f"a 200 answer that is not JSON: {response.text[:200]!r}"
                elif response.status_code == 429 or response.status_code >= 500:
                    problem = f"HTTP {response.status_code}: {response.text[:300]}"
                else:
                    raise ModelError(
                        f"{self.url} refused the request (HTTP {response.status_code}): "
                        f"{response.text[:500]}; check --model ({self.model!r}) and the prompt size")
            if last:
                raise ModelError(f"{self.url} gave no answer after {attempt + 1} attempt(s), "
                                 f"last: {problem}; check that the server is up (curl "
                                 f"{self.url.rsplit('/chat/', 1)[0]}/models)")
            log.warning("model call failed (%s); retry %d/%d in %.1fs", problem, attempt + 1,
                        opts.max_retries, delay)
            time.sleep(delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, opts.max_backoff_s)
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ModelClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _message_text(payload: dict[str, Any], url: str) -> str:
    """The first choice's text; content given as parts is joined."""
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ModelError(f"{url} answered without choices[0].message.content: "
                         f"{str(payload)[:300]}") from None
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        raise ModelError(f"{url} answered with content of type {type(content).__name__}")
    return content
