"""A fake phone for a real adb server: speaks enough of the adb transport protocol over TCP
(`adb connect 127.0.0.1:PORT`) to appear offline, unauthorized, or as a device whose shell
answers from a table and logs every command it is sent. No emulator, no phone."""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Callable

CNXN, AUTH, OPEN, OKAY, CLSE, WRTE = (0x4E584E43, 0x48545541, 0x4E45504F, 0x59414B4F,
                                      0x45534C43, 0x45545257)
AUTH_TOKEN, AUTH_SIGNATURE = 1, 2
VERSION, MAX_DATA = 0x01000001, 256 * 1024
BANNER = b"device::ro.product.name=fake;ro.product.model=Fake;ro.product.device=fake;\0"


def _message(command: int, arg0: int, arg1: int, data: bytes = b"") -> bytes:
    return struct.pack("<6I", command, arg0, arg1, len(data), sum(data) & 0xFFFFFFFF,
                       command ^ 0xFFFFFFFF) + data


def _read(conn: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


class FakeAdbd:
    """mode: "offline" (never answers), "unauthorized" (asks for auth forever), "device"."""

    def __init__(self, mode: str, outputs: dict[str, bytes | str] | None = None,
                 respond: Callable[[str], bytes | str | None] | None = None):
        self.mode = mode
        self.outputs = outputs or {}
        self.respond = respond
        self.commands: list[str] = []
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self.serial = f"127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        next_id = 1
        with conn:
            while True:
                header = _read(conn, 24)
                if header is None:
                    return
                command, arg0, _arg1, length, _, _ = struct.unpack("<6I", header)
                data = _read(conn, length) if length else b""
                if self.mode == "offline":
                    continue
                if command == CNXN:
                    if self.mode == "unauthorized":
                        conn.sendall(_message(AUTH, AUTH_TOKEN, 0, os.urandom(20)))
                    else:
                        conn.sendall(_message(CNXN, VERSION, MAX_DATA, BANNER))
                elif command == AUTH and arg0 == AUTH_SIGNATURE:
                    conn.sendall(_message(AUTH, AUTH_TOKEN, 0, os.urandom(20)))  # signature refused
                elif command == OPEN:
                    local, remote = arg0, next_id
                    next_id += 1
                    service = data.rstrip(b"\0").decode()
                    conn.sendall(_message(OKAY, remote, local))
                    out = self._output(service.removeprefix("shell:"))
                    for i in range(0, len(out), 64 * 1024):
                        conn.sendall(_message(WRTE, remote, local, out[i:i + 64 * 1024]))
                    conn.sendall(_message(CLSE, remote, local))

    def _output(self, command: str) -> bytes:
        self.commands.append(command)
        out = self.respond(command) if self.respond else None
        if out is None:
            out = self.outputs.get(command, b"")
        return out.encode() if isinstance(out, str) else out

    def close(self) -> None:
        self._sock.close()
