"""The API's screenshots of a lake on S3 are read from the store once: the second fetch of
an image asks the store nothing (counted at a TCP proxy in front of moto's real S3 API), the
image route and its thumbnails go through that cache, and a step recorded after a 404, in a
newer version of the lake, is served."""

from __future__ import annotations

import httpx
import pytest

from episodelake.api.images_cache import ImageCache, cache_of, stored_image
from episodelake.api.settings import Settings
from episodelake.collectors.record.recorder import Recorder
from episodelake.lake import Lake, NotFound
from tests.api.webapp_support import ServerThread  # noqa: E402  (the API tests' server thread)
from tests.factories import response, screenshot


def record(uri: str, episode_id: str, screens: list[int]) -> None:
    with Recorder(uri, image_checks="structure", anchor=None) as rec:
        with rec.start_episode("wifi_on", episode_id=episode_id) as ep:
            for seed in screens:
                ep.log_step(screenshot(seed), response())
            ep.finish(success=True)


def test_an_image_is_read_from_the_store_once(s3_proxied_lake, s3_proxy):
    record(s3_proxied_lake, "ep-1", [0, 1, 2])
    lake = Lake(s3_proxied_lake, create=False)
    assert stored_image(lake, "ep-1", 1) == (screenshot(1), "png")
    asked = s3_proxy.sent
    assert stored_image(lake, "ep-1", 1) == (screenshot(1), "png")
    assert s3_proxy.sent == asked  # the second fetch asked the store nothing
    assert stored_image(lake, "ep-1", 2) == (screenshot(2), "png") and s3_proxy.sent > asked

    # a step not there yet is not remembered as missing; a newer version changes no bytes
    with pytest.raises(NotFound):
        stored_image(lake, "ep-2", 0)
    record(s3_proxied_lake, "ep-2", [7])
    assert stored_image(lake, "ep-2", 0) == (screenshot(7), "png")
    assert stored_image(lake, "ep-1", 1) == lake.image("ep-1", 1)


def test_the_image_route_and_its_thumbnails_use_the_cache(s3_proxied_lake):
    """(The server's own compaction check reads the store now and then, so the count of
    requests is taken above, without a server.)"""
    record(s3_proxied_lake, "ep-1", [0, 1, 2])
    lake = Lake(s3_proxied_lake, create=False)
    with ServerThread(Settings(lake=s3_proxied_lake), lake) as srv:
        image = f"{srv.url}/api/episodes/ep-1/steps/1/image"
        assert httpx.get(image, timeout=30).content == screenshot(1)
        assert httpx.get(image, timeout=30).content == screenshot(1)
        thumb = httpx.get(image, params={"max_side": 64}, timeout=30)
        assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/jpeg"
        assert httpx.get(f"{srv.url}/api/episodes/ep-1/steps/9/image", timeout=30).status_code == 404
    cache = cache_of(lake)
    assert (cache.misses, cache.hits) == (2, 2) and cache.size == len(screenshot(1))


def test_the_cache_is_bounded_by_bytes():
    cache = ImageCache(max_bytes=100)
    for step in range(5):
        cache.put(("ep", step), (bytes(20), "png"))
    cache.put(("ep", 9), (bytes(26), "png"))  # over a quarter of the bound: served, not kept
    assert cache.get(("ep", 0)) == (bytes(20), "png")  # now the most recently used
    cache.put(("ep", 5), (bytes(20), "png"))
    assert cache.size == 100 and cache.get(("ep", 1)) is None and cache.get(("ep", 0)) is not None
    assert cache.get(("ep", 9)) is None
