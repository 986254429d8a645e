"""Waiting for what another thread or process does: poll a check until it holds or a deadline
passes, then fail saying what never happened. Every such wait in the Python tests goes
through here (the browser tests use Playwright's own waits), so each has a deadline and a
message, and a check can give up early by raising (a server process that exited, a thread that
died) instead of running the clock out."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

import httpx

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout_s: float = 60, every_s: float = 0.05, what: str = "the check") -> T:
    """`check()`'s first truthy answer; AssertionError naming `what` once `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(every_s)


def wait_serving(url: str, proc: subprocess.Popen | None = None, timeout_s: float = 60) -> httpx.Response:
    """The first answer `url` gives; fails at once, with its stderr, if `proc` (the server
    being waited for) exits first."""

    def answer() -> httpx.Response | None:
        try:
            return httpx.get(url, timeout=5)
        except httpx.TransportError:
            if proc is not None and proc.poll() is not None:
                stderr = proc.stderr.read() if proc.stderr else ""
                raise AssertionError(f"the server exited with {proc.returncode} before answering {url}: {stderr}") from None
            return None

    return wait_for(answer, timeout_s, every_s=0.2, what=f"{url} to answer")


def wait_job(client: httpx.Client, url: str, statuses: tuple[str, ...] | None = None, timeout_s: float = 60) -> dict:
    """The job at `url` (an export, a re-run, a job: its JSON) once its status is one of
    `statuses`, or, without them, once it no longer runs."""

    def settled() -> dict | None:
        body = client.get(url).json()
        done = body["status"] in statuses if statuses is not None else body["status"] != "running"
        return body if done else None

    return wait_for(settled, timeout_s, every_s=0.1, what=f"{url} to be {' or '.join(statuses or ('done',))}")
