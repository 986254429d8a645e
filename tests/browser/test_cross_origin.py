"""A page served from another port of 127.0.0.1 (the same site, so alice's SameSite=Strict
cookie rides along) tries what was once possible: undo alice's edit with a no-cors POST,
sign her out through an image and through a form. The server refuses each: the edit stays,
alice stays signed in, and the audit log has nothing new under her name."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from episodelake.api.settings import Settings, default_static_dir
from episodelake.lake.ops import edits, users
from tests.api.webapp_support import ServerThread, build_lake
from tests.waiting import wait_for

ATTACK = """<!doctype html><html><body>
<img src="{app}/signout" alt="">
<iframe name="sink" title="sink"></iframe>
<form id="out" method="post" action="{app}/signout" target="sink"></form>
<script>
fetch("{app}/api/edits/{job}/undo", {{method: "POST", mode: "no-cors", credentials: "include"}})
  .finally(() => {{ document.getElementById("out").submit(); document.title = "sent"; }});
</script></body></html>"""


@pytest.fixture(scope="module")
def victim(tmp_path_factory):
    lake = build_lake(tmp_path_factory.mktemp("cross-origin") / "lake")
    _, token = users.add(lake, "alice", "admin", by="test")
    with ServerThread(Settings(lake=lake.path, static_dir=default_static_dir()), lake) as server:
        yield lake, token, server


def serve(html: str):
    class Page(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the handler's name is http.server's)
            body = html.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def test_a_page_on_another_port_cannot_write_as_alice(browser, victim):
    lake, token, server = victim
    job = edits.retask(lake, "wifi_on-0", task="wifi_renamed", who="alice")["job_id"]
    page = browser.new_page()
    page.set_default_timeout(15_000)
    try:
        page.context.clear_cookies()
        page.goto(server.url + "/")
        page.get_by_label("Token").fill(token)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_test_id("signed-in").wait_for()
        audit_before = lake.sql("select count(*) n from audit").to_pylist()
        attacker = serve(ATTACK.format(app=server.url, job=job))
        try:
            page.goto(f"http://127.0.0.1:{attacker.server_address[1]}/")
            wait_for(lambda: page.title() == "sent", 15, what="the attack page's requests")
            page.wait_for_timeout(500)  # the form's POST lands in the frame
        finally:
            attacker.shutdown()
        page.goto(server.url + "/")
        page.get_by_test_id("signed-in").wait_for()  # still signed in
        assert "alice" in page.get_by_test_id("signed-in").inner_text()
        lake.invalidate()
        assert lake.episode("wifi_on-0")["task_name"] == "wifi_renamed"  # the edit stands
        assert lake.sql("select count(*) n from audit").to_pylist() == audit_before
        # and alice signs out herself, from the app
        page.get_by_test_id("signed-in").get_by_role("button", name="Sign out").click()
        page.get_by_label("Token").wait_for()
    finally:
        page.close()
