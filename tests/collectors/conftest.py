"""Fixtures for the collectors' tests: loopback servers that are stopped after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI

from episodelake.collectors.envs.server import create_app
from episodelake.collectors.envs.sim.device import SimDevice, task_infos
from tests.collectors.device_support import FakeModel, LiveServer


@pytest.fixture
def live():
    """`live(app)` starts a server; all are stopped after the test."""
    started: list[LiveServer] = []

    def start(app: FastAPI) -> LiveServer:
        server = LiveServer(app)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def sim_server(live):
    """`sim_server(devices=1)` serves simulated phones; returns the LiveServer."""

    def start(devices: int = 1) -> LiveServer:
        phones = {f"sim-{i}": SimDevice(0, name=f"sim-{i}") for i in range(devices)}
        return live(create_app(phones, task_infos()))

    return start


@pytest.fixture
def fake_model(live) -> Iterator[FakeModel]:
    yield FakeModel(live)
