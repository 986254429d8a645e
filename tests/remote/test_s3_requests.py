"""How many requests a lake on S3 costs: counted at the tests' TCP proxy, in front of moto.

Every request to an object store is a round trip (tens of milliseconds on a real bucket), so
opening a lake asks the store once per table, and what one open learned (which tables are
there, their handles, the filesystem client) serves the reads and writes after it."""

from __future__ import annotations

import pickle

from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake
from episodelake.lake.storage import schema
from episodelake.lake.storage.store import location
from tests.factories import response, screenshot

#: Opening a lake: one listing of the lake, then each table's versions listed and its
#: manifest read (Lance's own open); nothing else.
OPEN_REQUESTS = 1 + 2 * len(schema.TABLES)


def _record(lake, episode_id: str) -> None:
    with Recorder(lake, run_id="r1", image_checks="structure", anchor=None) as rec:
        with rec.start_episode("wifi_on", "Turn on Wi-Fi", episode_id=episode_id) as ep:
            for s in range(2):
                ep.log_step(screenshot(s), response(), reward=0.5)
            ep.finish(success=True)


def _manifests(requests: list[tuple[str, str]]) -> list[str]:
    return [target for method, target in requests if method == "GET" and target.endswith(".manifest")]


def test_opening_a_lake_asks_the_store_once_per_table(s3_proxied_lake, s3_proxy):
    _record(Lake(s3_proxied_lake), "ep-0")
    for create in (True, False):
        start = len(s3_proxy.requests)
        Lake(s3_proxied_lake, create=create)
        opened = s3_proxy.requests[start:]
        assert len(opened) <= OPEN_REQUESTS, opened  # 38 (create) and 40 (create=False) before
        assert [m for m, _ in opened].count("HEAD") == 0, opened  # no "is it there?" before opening
        assert len(_manifests(opened)) == len(set(_manifests(opened))) == len(schema.TABLES)


def test_the_first_query_and_a_writer_reuse_what_the_open_read(s3_proxied_lake, s3_proxy):
    _record(Lake(s3_proxied_lake), "ep-0")
    lake = Lake(s3_proxied_lake)
    start = len(s3_proxy.requests)
    assert lake.sql("SELECT count(*) AS n FROM steps").to_pylist() == [{"n": 2}]
    # nothing changed since the open: each table's versions are listed, no manifest is read again
    assert _manifests(s3_proxy.requests[start:]) == []

    start = len(s3_proxy.requests)
    _record(lake, "ep-1")
    written = s3_proxy.requests[start:]
    lake_listing = [t for _, t in written if "delimiter=%2F" in t]
    assert lake_listing == []  # the writer and the claims know the lake's tables already
    touched = {t.split("/")[3] for t in _manifests(written)}  # /bucket/lake/<table>/...
    assert touched <= {"_claims.lance", "episodes.lance", "steps.lance"}, touched
    # 67 before (another open of every table, listings per claim); 35 before a recorder's first
    # episode committed its row at once, alone (a commit more: the finish row is then merged apart)
    assert len(written) <= 40, written


def test_a_location_builds_its_filesystem_once_and_pickles_without_it(s3_lake):
    loc = location(s3_lake)
    fs, _ = loc._fs()
    assert (loc / "steps.lance")._fs()[0] is fs and loc._fs()[0] is fs
    loc.known_tables.add("steps")
    again = pickle.loads(pickle.dumps(loc))
    assert again == loc and again.storage_options == loc.storage_options
    assert again.known_tables == set() and again._filesystem is None
