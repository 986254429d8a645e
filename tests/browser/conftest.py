"""A real server over the test lake serving the built web app, and Debian's Chromium driven
by Playwright (never a downloaded browser). Screenshots go to test-artifacts/; the README's
pictures go to docs/screenshots/ only when asked (`just screenshots`, which sets
ELAKE_SCREENSHOTS=1), so an ordinary run leaves the tracked files alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from episodelake.api.settings import Settings, default_static_dir  # noqa: E402
from tests.api.webapp_support import ServerThread, build_lake  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
README_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
AXE = Path(__file__).resolve().parents[2] / "web" / "node_modules" / "axe-core" / "axe.min.js"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def web_lake(tmp_path_factory):
    return build_lake(tmp_path_factory.mktemp("browser") / "lake")


@pytest.fixture(scope="module")
def web_server(web_lake):
    static = default_static_dir()
    if static is None:
        pytest.fail("the web app is not built: run `just web` (builds web/ into api/static)")
    with ServerThread(Settings(lake=web_lake.path, static_dir=static), web_lake) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    playwright = pytest.importorskip("playwright.sync_api", reason="the browser tests drive Chromium with "
                                     "Playwright, which is not installed: pip install -e '.[dev]'")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium`")
    with playwright.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=ARGS, viewport={"width": 1400, "height": 900})
        yield context
        context.close()


@pytest.fixture
def page(browser, web_server):
    page = browser.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.base = web_server.url  # type: ignore[attr-defined]
    yield page
    page.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=False)


def readme_shot(page, name: str) -> Path:
    """The README's picture `name`.png: into docs/screenshots/ with ELAKE_SCREENSHOTS=1, else
    into test-artifacts/ (taken either way, so a run without it still checks the view)."""
    folder = README_SHOTS if os.environ.get("ELAKE_SCREENSHOTS") == "1" else ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def axe_violations(page) -> list[dict]:
    """axe's serious and critical findings. The script is served as if from the app's own
    origin (a routed URL), so the page's Content-Security-Policy stays on while it runs."""
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: run `just web-setup` (installs the web app's packages)")
    page.route("**/__axe.min.js", lambda route: route.fulfill(path=str(AXE), content_type="text/javascript"))
    page.add_script_tag(url="/__axe.min.js")
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [{"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
            for v in result["violations"] if v["impact"] in ("serious", "critical")]


@pytest.fixture(scope="module")
def chromium():
    """A browser whose contexts share nothing: one per person."""
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium`")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield browser
        browser.close()


def signed_in_pages(chromium, server, tokens: dict[str, str]):
    """A `person` fixture's body: yields `open_as(name, viewport=(w, h))`, a page in a browser
    context of that person's own, signed in with `tokens[name]`; afterwards closes each and
    fails on any JavaScript error it saw."""
    opened = []

    def open_as(name: str, viewport=(1400, 900)):
        context = chromium.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.goto(server.url + "/")
        page.get_by_label("Token").fill(tokens[name])
        page.get_by_role("button", name="Sign in").click()
        page.get_by_test_id("signed-in").wait_for()
        opened.append(page)
        return page

    yield open_as
    for page in opened:
        errors = page.errors
        page.context.close()
        assert not errors, f"JavaScript errors on the page: {errors}"
