"""A TCP proxy in front of the S3 server, for "the store went away" cases: the tests' `s3_proxy`
fixture and the remote benchmark's outage rows both use it (see tests/remote/conftest.py)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

from tests.waiting import wait_for


class _RequestParser:
    """Reads one connection's bytes towards the store and notes each HTTP/1.1 request line;
    bodies are skipped by their Content-Length or chunked framing, never looked into."""

    def __init__(self, seen: list[tuple[str, str]]):
        self.seen = seen
        self.buf = b""
        self.body_left = 0  # bytes of a body (or of a chunk and its CRLF) still to skip
        self.chunked = False

    def feed(self, data: bytes) -> list[tuple[str, str]]:
        """Take bytes; returns the requests that began in them."""
        before = len(self.seen)
        self._feed(data)
        return self.seen[before:]

    def _feed(self, data: bytes) -> None:
        self.buf += data
        while True:
            if self.body_left:
                skipped = min(self.body_left, len(self.buf))
                self.buf, self.body_left = self.buf[skipped:], self.body_left - skipped
                if self.body_left:
                    return
            if self.chunked:
                end = self.buf.find(b"\r\n")
                if end < 0:
                    return
                size = int(self.buf[:end].split(b";")[0] or b"0", 16)
                if size == 0:  # the last chunk, then trailers (if any) and an empty line
                    if self.buf[end + 2:end + 4] == b"\r\n":
                        rest = end + 4
                    else:
                        trailers = self.buf.find(b"\r\n\r\n", end + 2)
                        if trailers < 0:
                            return
                        rest = trailers + 4
                    self.buf, self.chunked = self.buf[rest:], False
                    continue
                self.buf, self.body_left = self.buf[end + 2:], size + 2
                continue
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head, self.buf = self.buf[:end].decode("latin-1").split("\r\n"), self.buf[end + 4:]
            method, target = head[0].split(" ")[:2]
            self.seen.append((method, target))
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
            self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
            self.body_left = 0 if self.chunked else int(headers.get("content-length") or 0)


class TcpProxy:
    """Forwards 127.0.0.1:<port> to a target port; `blocked()` makes the target unreachable.

    `delay_s`: each request waits that long before it is sent on (a store that answers in
    `delay_s` plus its own time, as a real bucket's round trip does; each connection waits
    on its own, so concurrent requests overlap as they would over a network)."""

    def __init__(self, target_port: int, delay_s: float = 0.0):
        self.target_port = target_port
        self.delay_s = delay_s
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._block = threading.Event()
        #: set while the store "hangs": connections are accepted and nothing is answered
        self._hang = threading.Event()
        self._held: list[socket.socket] = []
        self._closed = False
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        #: bytes sent to the store so far: unchanged over a call means it asked the store nothing
        self.sent = 0
        #: (method, target) of every HTTP request sent to the store so far
        self.requests: list[tuple[str, str]] = []
        self._deny: Callable[[str, str], bool] | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._hang.is_set():
                self._held.append(client)  # accepted, never answered
                continue
            if self._block.is_set():
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                client.close()  # reset: the store is unreachable
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._conns_lock:
                self._conns.update((client, upstream))
            parser = _RequestParser(self.requests)
            threading.Thread(target=self._pipe, args=(client, upstream, parser), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, to_store: _RequestParser | None = None) -> None:
        try:
            while True:
                data = src.recv(65536)
                while self._hang.is_set() and not self._block.is_set():
                    time.sleep(0.05)  # the store hangs: hold the bytes, send nothing
                if not data or self._block.is_set():
                    break
                if to_store is not None:
                    with self._conns_lock:
                        self.sent += len(data)
                        began = to_store.feed(data)
                    deny = self._deny
                    if deny is not None and any(deny(method, target) for method, target in began):
                        break  # cut before the store sees it
                    if began and self.delay_s:
                        time.sleep(self.delay_s)  # the round trip of a store farther away
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with self._conns_lock:
                    self._conns.discard(s)
                try:
                    s.close()
                except OSError:
                    pass

    def block(self) -> None:
        self._block.set()
        with self._conns_lock:
            conns = list(self._conns)
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def unblock(self) -> None:
        self._block.clear()

    @contextmanager
    def hanging(self):
        """The store hangs: new connections are accepted and never answered, open ones stop
        moving bytes. At the end the held connections are cut (their requests timed out, or
        fail now) and the store answers again."""
        self._hang.set()
        try:
            yield self
        finally:
            held, self._held = self._held, []
            self.block()  # cut what hung, as a client's timeout would
            for s in held:
                try:
                    s.close()
                except OSError:
                    pass
            self._hang.clear()
            self.unblock()

    @contextmanager
    def blocked(self):
        self.block()
        try:
            yield self
        finally:
            self.unblock()

    @contextmanager
    def refusing(self, deny: Callable[[str, str], bool]):
        """Cut the connection of each request for which `deny(method, target)` holds, before
        it reaches the store (e.g. every PUT: reads work, writes fail); the request is still
        counted in `requests`."""
        self._deny = deny
        try:
            yield self
        finally:
            self._deny = None

    def close(self) -> None:
        self._closed = True
        self.block()
        self._listener.close()


def flush_once_back(recorder, timeout_s: float = 120.0) -> None:
    """Flush `recorder` as soon as the store takes commits again (its background retry may
    land the rows first); fail the test if it does not within `timeout_s`."""
    from episodelake.lake.storage.writer import CommitFailed

    def flushed() -> bool:
        try:
            recorder.flush()
            return True
        except CommitFailed:
            return False

    wait_for(flushed, timeout_s, every_s=1, what="the store to take a commit")


def main() -> None:
    """`python -m tests.remote.proxy TARGET_PORT DELAY_MS`: a delaying proxy in a process of
    its own (the remote benchmark's store latency, away from the measuring process's GIL);
    prints its port, runs until stdin closes."""
    import sys

    proxy = TcpProxy(int(sys.argv[1]), delay_s=float(sys.argv[2]) / 1000)
    print(proxy.port, flush=True)
    sys.stdin.read()
    proxy.close()


if __name__ == "__main__":
    main()
