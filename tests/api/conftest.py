"""Fixtures: one recorded lake per module and a real server on loopback over it."""

from __future__ import annotations

import httpx
import pytest

from episodelake.api.settings import Settings
from tests.api.webapp_support import ServerThread, build_lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return build_lake(tmp_path_factory.mktemp("lake") / "lake")


@pytest.fixture(scope="module")
def server(lake):
    with ServerThread(Settings(lake=lake.path, static_dir=None), lake) as srv:
        yield srv


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c
