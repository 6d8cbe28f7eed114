"""A memory-sync endpoint that answers as a test tells it — what the sim cloud cannot do: a 200
that settles nothing, a body that is not the contract, a redirect, a sync position of its choice.
Every request is kept with its arrival time (monotonic)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sim.cloud import POLL_S  # shutdown() waits one poll

# what the peer does with one request body: (status, headers, JSON body or None)
Reply = tuple[int, dict[str, str], Any]
Answer = Callable[[dict[str, Any]], Reply]
SYNC_PATH = "/v1/a2a/memory/sync"
ELSEWHERE = "https://elsewhere.example/v1/a2a/memory/sync"


def write_ids(body: dict[str, Any]) -> list[str]:
    return [str(w.get("write_id")) for w in body.get("writes") or []]


def acked_all(version: str = "v1") -> Answer:
    return lambda body: (
        200,
        {},
        {"acked": write_ids(body), "sync": {"cursor": "c", "version": version}},
    )


def acked_none(_body: dict[str, Any]) -> Reply:
    return 200, {}, {"acked": []}


def not_the_contract(_body: dict[str, Any]) -> Reply:
    return 200, {}, {"acked": "all of them", "rejected": 3}


def redirect(status: int) -> Answer:
    return lambda _body: (status, {"location": ELSEWHERE}, None)


class SyncPeer:
    """`answer` is used for every request once `script` (answers for the next requests, in
    order) is empty; both may be changed while the runtime talks to it."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.script: list[Answer] = []
        self.arrivals: list[float] = []
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, headers, payload = peer.reply(self.path, body)
                data = b"" if payload is None else json.dumps(payload).encode("utf-8")
                self.send_response(status)
                for name, value in {"content-type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(POLL_S,), daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def reply(self, path: str, body: dict[str, Any]) -> Reply:
        if path != SYNC_PATH:
            return 404, {}, {"error": "not_found"}
        with self.lock:
            self.arrivals.append(time.monotonic())
            self.bodies.append(body)
            answer = self.script.pop(0) if self.script else self.answer
        return answer(body)

    def then(self, *once: Answer, after: Answer) -> None:
        """The next requests get `once` (in order), every later one `after`."""
        with self.lock:
            self.script[:] = list(once)
            self.answer = after

    def count(self) -> int:
        with self.lock:
            return len(self.arrivals)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
