"""The console's HTTP side (standard library `http.server`): one page, its JSON reads, one
event stream (server-sent events), one write (a cancel, passed on to the service).

Security, since the page shows the user's words and a browser elsewhere on the robot's network
may reach it:
- bound to 127.0.0.1 unless `--bind` says otherwise;
- a random token printed at start is required on every request: `?token=` once (the answer
  sets it as an HttpOnly, SameSite=Strict cookie and sends the browser on without it in the
  address), then the cookie; compared in constant time;
- the Host header must name this server by an address it is bound to or by `localhost`
  (a DNS-rebinding page reaches us under its own name and is refused);
- the cancel is a POST with a JSON body, the token in an `X-Console-Token` header (which a
  cross-site form cannot send and a cross-site script cannot read) and, when the browser sends
  an Origin, an Origin that is this server (CSRF);
- bounded: at most `MAX_CONNECTIONS` at once (more are answered 503 and closed), at most
  `MAX_STREAMS` event streams, a small body limit, and a deadline for the whole request
  (`REQUEST_TIMEOUT_S` for line + headers + body, however it trickles in: a socket timeout
  alone bounds each read, and 32 clients sending a byte every 5 s had held every slot);
  once the answer starts, only the socket timeout (an event stream lives on);
- every answer carries a Content-Security-Policy that allows no script but the page's own
  file and no framing; the page puts every text in with `textContent`, never as HTML."""

from __future__ import annotations

import contextlib
import hmac
import io
import json
import socket
import sqlite3
import threading
import time
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from a2a_common.sqlite import StorageError
from edge.config.settings import Settings
from edge.console.live import ID_MAX, Canceller, Changes
from edge.views import console as console_data

MAX_CONNECTIONS = 32
MAX_STREAMS = 8
MAX_BODY = 4096
SOCKET_TIMEOUT_S = 10.0  # each read or write of a connection
REQUEST_TIMEOUT_S = 10.0  # a whole request, from accept (or the previous answer) to its end
STREAM_BEAT_S = 5.0  # an event stream gets a `tick` this often: health and the heartbeat age
COOKIE = "a2a_console_{port}"  # per port: browsers do not keep cookies apart by port
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
STATIC = {
    "/": ("console.html", "text/html; charset=utf-8"),
    "/console.js": ("console.js", "text/javascript; charset=utf-8"),
    "/console.css": ("console.css", "text/css; charset=utf-8"),
}


class ConsoleServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 16

    def __init__(
        self,
        address: tuple[str, int],
        *,
        settings: Settings,
        token: str,
        changes: Changes,
        canceller: Canceller,
    ) -> None:
        self.settings, self.token, self.changes, self.canceller = (
            settings,
            token,
            changes,
            canceller,
        )
        self.request_timeout_s = REQUEST_TIMEOUT_S
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.streams = threading.BoundedSemaphore(MAX_STREAMS)
        self.stopping = threading.Event()  # before binding: a failed bind calls server_close
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)
        port = self.server_address[1]
        bound = str(self.server_address[0])
        names = {"localhost", "127.0.0.1", "[::1]", f"[{bound}]" if ":" in bound else bound}
        self.hosts = {f"{name}:{port}" for name in names}
        self.cookie = COOKIE.format(port=port)

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread per connection, but no more than MAX_CONNECTIONS: the rest get a 503."""
        if not self.slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                    b"Retry-After: 1\r\nConnection: close\r\n\r\n"
                )
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(SOCKET_TIMEOUT_S)
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def server_close(self) -> None:
        self.stopping.set()
        self.changes.bump({"what": "console", "stopping": True})
        super().server_close()


class _DeadlineReader(io.RawIOBase):
    """The socket's reads under the request's deadline: each waits at most the time left
    (and at most SOCKET_TIMEOUT_S), none starts once it has passed (TimeoutError, which
    `handle_one_request` answers by closing the connection). `deadline = None`: no deadline."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request's deadline passed")
            self.sock.settimeout(min(SOCKET_TIMEOUT_S, left))
        return self.sock.recv_into(buffer)


class Handler(BaseHTTPRequestHandler):
    server: ConsoleServer
    protocol_version = "HTTP/1.1"
    server_version = "a2a-edge-console"
    sys_version = ""
    reader: _DeadlineReader

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the socket's own file: closed, or the socket would stay open
        self.reader = _DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self.reader)

    def handle_one_request(self) -> None:
        """Each request (the first from accept, the next from the previous answer) must be
        all there by its deadline, however slowly it trickles in."""
        self.reader.deadline = time.monotonic() + self.server.request_timeout_s
        super().handle_one_request()

    def send_response(self, code: int, message: str | None = None) -> None:
        """The answer starts: the request is complete (an event stream is not cut off)."""
        self.reader.deadline = None
        self.connection.settimeout(SOCKET_TIMEOUT_S)
        super().send_response(code, message)

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: request lines carry the token and typed utterances."""

    # --- checks ---------------------------------------------------------------------------
    def _host_ok(self) -> bool:
        return self.headers.get("Host", "") in self.server.hosts

    def _token_given(self) -> str:
        query = parse_qs(urlsplit(self.path).query).get("token", [""])[0]
        header = self.headers.get("X-Console-Token", "")
        cookie = SimpleCookie()
        try:
            cookie.load(self.headers.get("Cookie", ""))
        except Exception:  # a malformed cookie header is no token
            return query or header
        name = self.server.cookie
        held = cookie[name].value if name in cookie else ""
        return query or header or held

    def _token_ok(self, given: str) -> bool:
        return hmac.compare_digest(given.encode("utf-8"), self.server.token.encode("utf-8"))

    def _guard(self) -> bool:
        """Host and token; False after answering the refusal."""
        if not self._host_ok():
            self._send_json(HTTPStatus.MISDIRECTED_REQUEST, {"error": "unknown host"})
            return False
        if not self._token_ok(self._token_given()):
            self._send_json(HTTPStatus.UNAUTHORIZED, {"error": "the console's token is needed"})
            return False
        return True

    # --- answers --------------------------------------------------------------------------
    def _headers(self, status: int, kind: str, length: int | None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self._headers(status, kind, len(body))
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, value: Any) -> None:
        self._send(status, "application/json; charset=utf-8", console_data.dumps(value))

    def _read(self, reader: Any, *args: Any) -> None:
        """Answer with `reader(settings, *args)`, or 503 when the state DB cannot be read."""
        try:
            value = reader(self.server.settings, *args)
        except (StorageError, sqlite3.Error) as exc:
            self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"state DB: {exc}"})
            return
        if value is None:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": "no such workflow"})
            return
        self._send_json(HTTPStatus.OK, value)

    # --- routes ---------------------------------------------------------------------------
    def do_GET(self) -> None:
        if not self._guard():
            return
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/" and "token" in query:
            self._enter()
        elif url.path in STATIC:
            self._static(*STATIC[url.path])
        elif url.path == "/api/overview":
            self._read(console_data.overview)
        elif url.path == "/api/workflow":
            wf = query.get("id", [""])[0]
            if not wf or len(wf) > ID_MAX:
                self._send_json(HTTPStatus.BAD_REQUEST, {"error": "id: a workflow id is needed"})
            else:
                self._read(console_data.workflow, wf)
        elif url.path == "/api/snapshot":
            self._snapshot(query.get("utterance", [""])[0])
        elif url.path == "/events":
            self._events()
        else:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": "not found"})

    def _enter(self) -> None:
        """`/?token=…`: the token becomes a cookie and leaves the address bar."""
        self.send_response(HTTPStatus.SEE_OTHER)
        self.send_header("Location", "/")
        self.send_header(
            "Set-Cookie",
            f"{self.server.cookie}={self.server.token}; HttpOnly; SameSite=Strict; Path=/",
        )
        self.send_header("Content-Length", "0")
        self.send_header("Referrer-Policy", "no-referrer")
        self.end_headers()

    def _static(self, name: str, kind: str) -> None:
        body = resources.files("edge.console").joinpath("static", name).read_bytes()
        if name == "console.html":  # the cancel's header token, for the page's own script
            body = body.replace(b"{{TOKEN}}", self.server.token.encode("ascii"))
        self._send(HTTPStatus.OK, kind, body)

    def _snapshot(self, utterance: str) -> None:
        if len(utterance) > console_data.UTTERANCE_MAX:
            limit = console_data.UTTERANCE_MAX
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": f"utterance: at most {limit}"})
            return
        self._read(console_data.snapshot, utterance)

    def do_POST(self) -> None:
        if not self._guard():
            return
        if urlsplit(self.path).path != "/api/cancel":
            self._send_json(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        refused = self._csrf_refusal()
        if refused:
            self._send_json(HTTPStatus.FORBIDDEN, {"error": refused})
            return
        workflow_id = self._body_workflow_id()
        if workflow_id is None:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": "body: {workflow_id: str} needed"})
            return
        status, answer = self.server.canceller.cancel(workflow_id)
        self._send_json(status, answer)

    def _csrf_refusal(self) -> str:
        header = self.headers.get("X-Console-Token", "")
        if not header or not self._token_ok(header):
            return "a cancel needs the X-Console-Token header"
        origin = self.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc not in self.server.hosts:
            return "cross-origin request"
        if not self.headers.get("Content-Type", "").startswith("application/json"):
            return "a cancel is a JSON body"
        return ""

    def _body_workflow_id(self) -> str | None:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            return None
        if not 0 < length <= MAX_BODY:
            return None
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None
        wf = body.get("workflow_id") if isinstance(body, dict) else None
        return wf if isinstance(wf, str) and 0 < len(wf) <= ID_MAX else None

    def do_PUT(self) -> None:
        self._send_json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "no write but the cancel"})

    do_DELETE = do_PATCH = do_PUT

    # --- the event stream -----------------------------------------------------------------
    def _events(self) -> None:
        if not self.server.streams.acquire(blocking=False):
            self._send_json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": "too many event streams"})
            return
        try:
            self._stream()
        except OSError:  # the page went away
            pass
        finally:
            self.server.streams.release()
            self.close_connection = True

    def _stream(self) -> None:
        self._headers(HTTPStatus.OK, "text/event-stream; charset=utf-8", None)
        self.send_header("Connection", "close")
        self.end_headers()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        changes = self.server.changes
        seen = changes.seq
        self._event("hello", {"following": changes.following, "service": changes.service})
        while not self.server.stopping.is_set():
            now = changes.wait(seen, STREAM_BEAT_S)
            if now == seen:
                self._event("tick", {"following": changes.following, "service": changes.service})
                continue
            seen = now
            self._event("change", {**changes.last, "following": changes.following})

    def _event(self, name: str, data: dict[str, Any]) -> None:
        line = f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
        self.wfile.write(line.encode("utf-8"))
        self.wfile.flush()
