"""The reference cloud planner: a real HTTP server of SPEC §3 (the planning is `sim.planner`).

It answers turns, memory sync and workflow events, keeps a cursor/version per device, and
records every request.
A control surface under `/_sim/` lets tests inject faults and read the request log
(`a2a-edge sim cloud --latency-s/--status/--down/--malformed` set faults from the start):

- `POST /_sim/faults` `{"latency_s", "status", "malformed", "drop", "times"}` — `times` limits how
  many requests the fault hits (absent: until reset);
- `GET /_sim/requests` — every request received, oldest first; a batch of workflow reports
  (SPEC §3.3) is one record per report, its body the single form's, marked `batch` (the batch's
  `request_id`); once answered a record has `took_s`, the cloud's own time for the request
  (its headers read → its answer written: bench.floor takes it out of a turn's round trip);
- `GET /_sim/posts` — every HTTP request as it came (`path`, `reports`: how many it carried,
  `bytes`: its body's length);
- `GET /_sim/reports` — workflow reports taken, each once by `request_id` whichever road it came
  by (event, batch, `task_terminal` write), and the duplicates seen;
- `POST /_sim/batch` `{"refuse": 404 | 400 | null, "accept_max": n | null, "hold": "events" |
  "batch" | null}` — a cloud without the batch form, one that takes a batch only up to
  `accept_max` reports, answers to events (or to batches) held after they were applied (a
  device killed meanwhile never reads them) until `hold` is set again (`"let_go": n`: n of
  them go all the same);
- `POST /_sim/sync` `{"script": [{"status": 409, "updates": {…}}, …], "reject_marker",
  "reject_mode": "rejected" | "http422"}` — scripted memory-sync answers and poison writes;
- `GET /_sim/sync` — how many writes were applied (each once), duplicates seen, their order;
- `POST /_sim/reset` — forget faults and the log.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sim.cloud_state import CloudState, Faults
from sim.planner import memory_sync, plan_turn, supervise

log = logging.getLogger(__name__)
MAX_BODY = 16 * 1024 * 1024
EVENTS = "/v1/a2a/workflow/events"
HOLD_MAX_S = 120.0  # a held answer goes at the latest then


def _batch_of(body: Any) -> list[dict[str, Any]] | None:
    """The entries of a batch of reports (None: not one); an entry that is no object is {}."""
    if not isinstance(body, dict) or not isinstance(body.get("batch"), list):
        return None
    return [e if isinstance(e, dict) else {} for e in body["batch"]]


def _entry_ok(entry: dict[str, Any]) -> bool:
    return (
        isinstance(entry.get("workflow_id"), str)
        and isinstance(entry.get("event"), dict)
        and isinstance(entry.get("workflow"), dict)
    )


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    fault = Faults()  # the one this request takes
    batch: list[dict[str, Any]] | None = None  # this request's batch of reports, if one
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in two writes

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, body: Any, raw: bytes | None = None) -> None:
        if self.path == EVENTS:
            self._held()
        data = raw if raw is not None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/json; charset=utf-8")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY:
            return None
        try:
            return json.loads(self.rfile.read(length).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None

    def do_GET(self) -> None:
        state = self.server.state
        if self.path == "/_sim/requests":
            with state.lock:
                self._send(200, list(state.requests))
        elif self.path == "/_sim/sync":
            with state.lock:
                self._send(
                    200,
                    {
                        "applied": len(state.applied),
                        "duplicates": state.duplicates,
                        "order": [w.get("write_id") for w in state.applied_log],
                    },
                )
        elif self.path == "/_sim/posts":
            with state.lock:
                self._send(200, list(state.posts))
        elif self.path == "/_sim/reports":
            with state.lock:
                taken = dict(state.reports)
                self._send(200, {"taken": taken, "duplicates": state.report_duplicates})
        elif self.path == "/_sim/health":
            self._send(200, {"ok": True})
        else:
            self._send(404, {"error": "not_found"})

    def do_POST(self) -> None:
        arrived = time.monotonic()  # the request line and headers read
        body = self._body()
        if self.path.startswith("/_sim/"):
            self._control(body)
            return
        records = self._record(body)
        try:
            self._answer(body)
        finally:  # the cloud's own time for it: arrival -> answer written (bench.floor)
            took = time.monotonic() - arrived
            with self.server.state.lock:
                for record in records:
                    record["took_s"] = took

    def _answer(self, body: Any) -> None:
        state = self.server.state
        self.batch = _batch_of(body) if self.path == EVENTS else None
        fault = self.fault = state.take_fault(self.path)
        if fault.latency_s:
            time.sleep(fault.latency_s)
        if fault.drop:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if state.refuse_batch is not None and self.batch is not None:
            self._send(state.refuse_batch, {"error": "batch_not_supported"})
            return
        if fault.status is not None:
            self._send(fault.status, {"error": "injected", "status": fault.status})
            return
        if fault.malformed:
            self._send(200, None, raw=b'{"request_id": "truncated')
            return
        if not isinstance(body, dict):
            self._send(400, {"error": "bad_request", "detail": "body must be a JSON object"})
            return
        self._route(body)

    def _route(self, body: dict[str, Any]) -> None:
        state = self.server.state
        device = str(body.get("device_id", ""))
        if self.path == "/v1/a2a/turn":
            answer = plan_turn(state, body)
            scripted, override = state.next_scripted(state.turn_script)
            if scripted:
                answer.update(override)
                workflows = answer.get("device_workflow_requests") or []
                if workflows and answer.get("memory_update"):
                    first = str(workflows[0].get("workflow_id", ""))
                    answer["memory_update"]["device_cache_update"]["active_workflow_id"] = first
                    answer["memory_update"]["write_candidates"]["short_term_pair"][
                        "workflow_id"
                    ] = first
            self._send(200, answer)
        elif self.path == "/v1/a2a/memory/sync":
            status, answer = memory_sync(state, device, body)
            self._send(status, answer)
        elif self.path == EVENTS and "batch" in body:
            self._batch(body)
        elif self.path == EVENTS:
            with state.lock:
                state.take_report(body.get("request_id"))
            self._send(200, {"decision": supervise(state, body)})
        else:
            self._send(404, {"error": "not_found"})

    def _held(self) -> None:
        """Wait while this answer is held (`POST /_sim/batch` `hold`), at most HOLD_MAX_S."""
        state = self.server.state
        kind = "batch" if self.batch is not None else "events"
        with state.changed:
            state.held += 1
            state.changed.notify_all()
            state.changed.wait_for(
                lambda: state.hold not in (kind, "events") or state.let_go > 0, HOLD_MAX_S
            )
            if state.hold in (kind, "events") and state.let_go > 0:
                state.let_go -= 1
            state.held -= 1

    def _record(self, body: Any) -> list[dict[str, Any]]:
        """Log the request (its records, returned, get `took_s` once it is answered)."""
        now, state = time.time(), self.server.state
        batch = _batch_of(body) if self.path == EVENTS else None
        with state.lock:
            size = int(self.headers.get("content-length") or 0)
            count = 1 if batch is None else len(batch)
            state.posts.append({"path": self.path, "reports": count, "bytes": size, "at": now})
            if batch is None:
                records = [{"path": self.path, "body": body, "at": now}]
            else:
                mark = body.get("request_id")
                records = [
                    {
                        "path": self.path,
                        "body": {
                            "device_id": body.get("device_id"),
                            **e,
                            "decision_requested": False,
                        },
                        "at": now,
                        "batch": mark,
                    }
                    for e in batch
                ]
            state.requests.extend(records)
        return records

    def _batch(self, body: dict[str, Any]) -> None:
        """Terminal reports several in one request (SPEC §3.3): the first `accept_max` taken."""
        state = self.server.state
        batch = _batch_of(body)
        if not batch or not all(_entry_ok(e) for e in batch):
            self._send(400, {"error": "bad_request", "detail": "batch entries are invalid"})
            return
        limit = state.accept_max
        accepted = len(batch) if limit is None else min(limit, len(batch))
        with state.lock:
            for entry in batch[:accepted]:
                state.take_report(entry.get("request_id"))
        self._send(200, {"accepted": accepted})

    def _control(self, body: Any) -> None:
        state = self.server.state
        if self.path == "/_sim/faults" and isinstance(body, dict):
            known = set(Faults.__dataclass_fields__)
            with state.lock:
                state.faults = Faults(**{k: v for k, v in body.items() if k in known})
            self._send(200, {"ok": True})
        elif self.path == "/_sim/sync" and isinstance(body, dict):
            with state.lock:
                state.sync_script.extend(body.get("script") or [])
                if "reject_marker" in body:
                    state.reject_marker = body["reject_marker"]
                state.reject_mode = body.get("reject_mode", state.reject_mode)
            self._send(200, {"ok": True})
        elif self.path == "/_sim/batch" and isinstance(body, dict):
            with state.changed:
                state.refuse_batch = body.get("refuse", state.refuse_batch)
                state.accept_max = body.get("accept_max", state.accept_max)
                state.hold = body.get("hold", state.hold)
                state.let_go += int(body.get("let_go") or 0)
                state.changed.notify_all()
            self._send(200, {"ok": True})
        elif self.path == "/_sim/reset":
            with state.lock:
                state.faults = Faults()
                state.requests.clear()
                state.posts.clear()
            self._send(200, {"ok": True})
        else:
            self._send(404, {"error": "not_found"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, state: CloudState) -> None:
        super().__init__((host, port), _Handler)
        self.state = state

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer (a killed runtime, a dropped test) is normal."""
        log.debug("request from %s ended early", client_address, exc_info=True)


POLL_S = 0.05  # how soon serve_forever sees a shutdown


class SimCloud:
    """The planner in a background thread of this process (tests, demo)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.state = CloudState()
        self._server = _Server(host, port, self.state)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> SimCloud:
        # shutdown() waits for the loop's next poll: 0.05 s, not socketserver's 0.5 (paid at
        # the end of every test that starts a cloud)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(POLL_S,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def requests(self, path: str | None = None) -> list[dict[str, Any]]:
        with self.state.lock:
            return [r for r in self.state.requests if path is None or r["path"] == path]

    def script_turn(self, **override: Any) -> None:
        """The next turn's answer gets these fields (e.g. `device_workflow_requests`)."""
        with self.state.lock:
            self.state.turn_script.append(override)

    def script_decision(self, decision: dict[str, Any] | None) -> None:
        """The next decision request is answered with this decision."""
        with self.state.lock:
            self.state.decision_script.append(decision)

    def script_sync(self, *answers: dict[str, Any]) -> None:
        """The next memory-sync requests get these answers (`{"status": 409, "updates": …}`)."""
        with self.state.lock:
            self.state.sync_script.extend(answers)

    def reject_writes(self, marker: str | None, mode: str = "rejected") -> None:
        """Writes whose payload contains `marker` are rejected (or the whole batch: `http422`)."""
        with self.state.lock:
            self.state.reject_marker, self.state.reject_mode = marker, mode

    def posts(self, path: str | None = None) -> list[dict[str, Any]]:
        """Every HTTP request as it came (`reports`: how many reports a batch carried)."""
        with self.state.lock:
            return [p for p in self.state.posts if path is None or p["path"] == path]

    def reports(self) -> dict[str, int]:
        """Workflow reports taken: `request_id` -> times received (1: no duplicate)."""
        with self.state.lock:
            return dict(self.state.reports)

    def batch_faults(self, *, refuse: int | None = None, accept_max: int | None = None) -> None:
        """Batches of reports answered `refuse` (404, 400: no batch form), or taken only up
        to `accept_max` reports (the first ones)."""
        with self.state.lock:
            self.state.refuse_batch, self.state.accept_max = refuse, accept_max

    def hold_answers(self, kind: str | None) -> None:
        """Hold answers to events ("events") or to batches only ("batch") once applied, or
        let them go (None)."""
        with self.state.changed:
            self.state.hold = kind
            self.state.changed.notify_all()

    def let_go(self, count: int = 1) -> None:
        """This many held answers go (the next ones held too), the hold stays."""
        with self.state.changed:
            self.state.let_go += count
            self.state.changed.notify_all()

    def held(self) -> int:
        """Answers waiting on a hold now."""
        with self.state.lock:
            return self.state.held

    def synced(self) -> list[dict[str, Any]]:
        """Writes applied, in order, each once."""
        with self.state.lock:
            return list(self.state.applied_log)

    def set_faults(self, **faults: Any) -> None:
        with self.state.lock:
            self.state.faults = Faults(**faults)


def serve_forever(host: str, port: int, faults: Faults | None = None) -> None:
    server = _Server(host, port, CloudState(faults=faults or Faults()))
    log.info("sim cloud listening on http://%s:%d", host, server.server_address[1])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
