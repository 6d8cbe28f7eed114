"""Hostile clouds the sim cannot play: one that answers with a body of hundreds of megabytes
(made as it is sent, never held), one behind a certificate nobody vouches for; and the
runtime's memory as the kernel counts it."""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from sim.cloud import POLL_S  # shutdown() waits one poll

CHUNK = b" " * 65536  # JSON whitespace: the body is never finished, so never valid


@dataclass
class Sent:
    path: str
    mode: str
    bytes_sent: int
    finished: bool


@dataclass(frozen=True)
class Memory:
    rss_kb: int
    hwm_kb: int


def memory_of(pid: int) -> Memory:
    """VmRSS and VmHWM (the peak resident set) of `pid`, in kB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return Memory(int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0]))


class _Serving(ThreadingHTTPServer):
    """A loopback server in a thread of its own, for a `with` block."""

    daemon_threads = True
    scheme = "http"

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self.serve_forever, args=(POLL_S,), daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.shutdown()
        self.server_close()


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _HugeHandler(_Quiet):
    server: HugeBodies

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        mode = self.server.mode
        if mode == "small":  # a quick wrong answer: warms the same paths up
            turn = self.path.endswith("/turn")
            self._small(200 if turn else 503, b"{}")
            return
        self.send_response(200)
        self.send_header("content-type", "application/json")
        if mode == "length":
            self.send_header("content-length", str(self.server.size))
        else:
            self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        sent, finished = 0, False
        try:
            while sent < self.server.size:
                part = CHUNK[: self.server.size - sent]
                framed = part if mode == "length" else b"%x\r\n%s\r\n" % (len(part), part)
                self.wfile.write(framed)
                sent += len(part)
            if mode == "chunked":
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            finished = True
        except OSError:  # the runtime closed the connection: what we want to see
            pass
        self.close_connection = True
        with self.server.lock:
            self.server.sent.append(Sent(self.path, mode, sent, finished))

    def _small(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HugeBodies(_Serving):
    """Every POST answered 200 with `size` bytes, declared (`mode = "length"`) or chunked
    (`"chunked"`); `"small"`: `{}` for a turn, 503 for the rest. `sent` records each answer."""

    def __init__(self, size: int) -> None:
        super().__init__(_HugeHandler)
        self.size = size
        self.mode = "small"
        self.lock = threading.Lock()
        self.sent: list[Sent] = []

    def answers(self, path: str) -> list[Sent]:
        with self.lock:
            return [s for s in self.sent if s.path == path and s.mode != "small"]


class _Unavailable(_Quiet):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.requests += 1  # type: ignore[attr-defined]
        self.send_response(503)
        self.send_header("content-length", "0")
        self.end_headers()


class TlsCloud(_Serving):
    """HTTPS on loopback with the certificate given; every request that gets through the
    handshake is answered 503 and counted."""

    scheme = "https"

    def __init__(self, cert: Path, key: Path) -> None:
        super().__init__(_Unavailable)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.requests = 0
