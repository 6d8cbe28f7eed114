"""`a2a-edge console` at the HTTP level against a real runtime (Mosquitto, the sim cloud, device
agents): the token, the Host check (DNS rebinding), the cancel's CSRF checks, the bounds on
connections and event streams, live events, the service down and the DB missing; and that
`run` does not import any of it."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from edge.config.settings import load_secrets, load_settings
from edge.console import server as console_http
from edge.console.live import Canceller, Changes
from edge.console.server import MAX_CONNECTIONS, MAX_STREAMS, ConsoleServer
from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, eventually
from tests.e2e.consoles import Console, running_console
from tests.e2e.test_privacy_tiers import HEALTH, memory_update
from tests.taskmanager.helpers import MOVE_PURIFY

EVENTS = f"{ROOT}/workflow/event"
STATIC = Path(__file__).parents[2] / "edge" / "console" / "static"


def plan(cloud: SimCloud, workflow_id: str) -> None:
    cloud.script_turn(
        route_family="ODL",
        assistant_text="안방으로 이동해서 청정을 시작할게요.",
        device_workflow_requests=[{**MOVE_PURIFY, "workflow_id": workflow_id}],
    )


def cancel(console: Console, body: Any, **headers: str) -> tuple[int, dict[str, Any]]:
    sent = {
        "Content-Type": "application/json",
        "X-Console-Token": console.token,
        "Cookie": f"a2a_console_{console.port}={console.token}",
        **headers,
    }
    status, _, raw = console.request(
        "POST", "/api/cancel", body=json.dumps(body).encode(), headers=sent
    )
    return status, json.loads(raw)


def authed(console: Console) -> dict[str, str]:
    return {"Cookie": f"a2a_console_{console.port}={console.token}"}


def test_run_does_not_import_the_console() -> None:
    """The service keeps its footprint: the console's server, follower and page stay out."""
    script = (
        "import sys\n"
        "from edge.cli.entry import parser\n"
        "from edge import wiring\n"
        "from edge.cli import service as cli_service\n"
        "from edge.runtime import executor as runtime\n"
        "args = parser().parse_args(['run', '--config', '/nonexistent.toml'])\n"
        "assert args.func is cli_service.cmd_run\n"
        "print(sorted(m for m in sys.modules if m.startswith(('edge.console', 'selenium'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_token_host_and_page_headers(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime = runtime_factory()
    with running_console(runtime.config) as console:
        assert console.request("GET", "/")[0] == 401
        assert (
            console.request(
                "GET", "/api/overview", headers={"Cookie": f"a2a_console_{console.port}=x"}
            )[0]
            == 401
        )
        assert console.request("GET", "/?token=" + "x" * len(console.token))[0] == 401
        status, headers, _ = console.request("GET", f"/?token={console.token}")
        assert status == 303 and headers["location"] == "/"
        assert "HttpOnly" in headers["set-cookie"] and "SameSite=Strict" in headers["set-cookie"]
        # DNS rebinding: a page under another name reaches us with its own Host
        rebound = {**authed(console), "Host": f"attacker.example:{console.port}"}
        assert console.request("GET", "/api/overview", headers=rebound)[0] == 421
        status, headers, page = console.request("GET", "/", headers=authed(console))
        assert status == 200 and b"a2a-edge console" in page
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        status, _, body = console.request("GET", "/api/overview", headers=authed(console))
        overview = json.loads(body)
        assert status == 200 and overview["health"]["service"] == "running"
        assert set(overview) == {"workflows", "memory", "sync", "health", "consent"}
        assert console.request("GET", "/api/workflow?id=wf-none", headers=authed(console))[0] == 404
        too_long = "/api/workflow?id=" + "w" * 201
        assert console.request("GET", too_long, headers=authed(console))[0] == 400
        bad_cookie = {"Cookie": f'a2a_console_{console.port}="; x=\\'}
        assert console.request("GET", "/api/overview", headers=bad_cookie)[0] == 401
        # no write but the cancel
        assert console.request("PUT", "/api/overview", headers=authed(console))[0] == 405
        assert console.request("POST", "/api/overview", headers=authed(console))[0] == 404
    # every text goes in as text: the page's script never builds HTML from data
    script = (STATIC / "console.js").read_text()
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script
    assert "document.write" not in script


def test_cancel_needs_its_header_same_origin_json_and_lands_through_the_service(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime = runtime_factory()
    plan(cloud, "wf-c1")
    probe.turn("t-c1", "안방으로 가서 청정해줘")
    probe.wait_for(
        EVENTS, lambda b: b.get("workflow_id") == "wf-c1" and b.get("status") == "RUNNING"
    )
    with running_console(runtime.config) as console:
        body = {"workflow_id": "wf-c1"}
        assert cancel(console, body, **{"X-Console-Token": ""})[0] == 403  # cookie alone: CSRF
        assert cancel(console, body, **{"X-Console-Token": "nope"})[0] == 401  # a wrong token
        assert cancel(console, body, Origin="http://attacker.example")[0] == 403
        assert cancel(console, body, **{"Content-Type": "text/plain"})[0] == 403
        for bad in ({"workflow_id": 7}, ["wf-c1"], {"workflow_id": "x" * 201}, {}):
            assert cancel(console, bad)[0] == 400
        assert cancel(console, {"workflow_id": "wf-unknown"})[0] == 409
        assert not [e for e in probe.messages(EVENTS) if e.get("status") == "WORKFLOW_CANCELLED"]
        status, answer = cancel(console, body, Origin=console.base)
        assert status == 200 and answer["result"]["cancelled"] == ["wf-c1"]
        ended = probe.wait_for(
            EVENTS,
            lambda b: b.get("workflow_id") == "wf-c1" and b.get("status") == "WORKFLOW_CANCELLED",
        )
        assert ended["reason"] == "user"
        assert cancel(console, body)[0] == 409  # no longer active
        runtime.terminate()
        status, answer = cancel(console, body)
        assert status == 503 and "not running" in answer["error"]


def _read_event(sock: socket.socket, name: str, deadline: float) -> dict[str, Any]:
    buffer = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(4096)
        assert chunk, "the stream ended"
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            lines = dict(
                line.split(": ", 1) for line in block.decode().splitlines() if ": " in line
            )
            if lines.get("event") == name:
                return dict(json.loads(lines["data"]))
    raise AssertionError(f"no {name} event in time")


def _stream(console: Console) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", console.port), timeout=5)
    sock.sendall(
        f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{console.port}\r\n"
        f"Cookie: a2a_console_{console.port}={console.token}\r\n\r\n".encode()
    )
    return sock


def test_events_are_live_and_streams_and_connections_are_bounded(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    runtime = runtime_factory()
    with running_console(runtime.config) as console:
        first = _stream(console)
        following = _read_event(first, "hello", time.monotonic() + 5)["following"]
        while not following:  # until the console has subscribed
            following = _read_event(first, "change", time.monotonic() + 5)["following"]
        plan(cloud, "wf-live")
        probe.turn("t-live", "안방으로 가서 청정해줘")
        probe.wait_for(EVENTS, lambda b: b.get("workflow_id") == "wf-live")
        deadline = time.monotonic() + 1.0  # the page hears of it within a second
        while _read_event(first, "change", deadline).get("workflow_id") != "wf-live":
            pass
        streams = [first] + [_stream(console) for _ in range(MAX_STREAMS - 1)]
        for sock in streams[1:]:
            _read_event(sock, "hello", time.monotonic() + 5)
        status, _, _ = console.request("GET", "/events", headers=authed(console))
        assert status == 503  # one stream too many
        idle = [
            socket.create_connection(("127.0.0.1", console.port)) for _ in range(MAX_CONNECTIONS)
        ]
        try:
            refused = eventually(lambda: _refused(console), timeout_s=5)
            assert b"503" in refused
        finally:
            for sock in idle + streams:
                sock.close()
        assert eventually(lambda: console.request("GET", "/", headers=authed(console))[0] == 200)


def _refused(console: Console) -> bytes:
    sock = socket.create_connection(("127.0.0.1", console.port), timeout=5)
    try:
        sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{console.port}\r\n\r\n".encode())
        return sock.recv(100)
    finally:
        sock.close()


def test_without_a_state_db_or_a_broker_the_page_says_so(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n[mqtt]\nport = 1\n')
    with running_console(config) as console:
        assert console.request("GET", "/", headers=authed(console))[0] == 200
        status, _, body = console.request("GET", "/api/overview", headers=authed(console))
        assert status == 503 and "does not exist" in json.loads(body)["error"]
        status, _, body = console.request(
            "GET", "/api/snapshot?utterance=x", headers=authed(console)
        )
        assert status == 503
        status, _, body = console.request(
            "GET", f"/api/snapshot?utterance={quote('가' * 501)}", headers=authed(console)
        )
        assert status == 400
        assert console.proc.poll() is None  # still serving
        again = ["console", "--config", str(config), "--port", str(console.port)]
        taken = subprocess.run(
            [sys.executable, "-m", "edge", *again],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert taken.returncode == 1 and "cannot listen on 127.0.0.1" in taken.stderr
        assert len(taken.stderr.strip().splitlines()) == 1


def test_snapshot_of_an_utterance_and_what_the_policy_withholds(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime = runtime_factory()  # no consent for health (the default)
    condition = {"key": "condition", "value": "고혈압", "category": "health"}
    room = {"key": "preferred_room", "value": "안방", "category": "preference"}
    cloud.script_turn(memory_update=memory_update(HEALTH, candidates=[condition]))
    probe.turn("t-health", HEALTH)
    cloud.script_turn(memory_update=memory_update("안방이 좋아", candidates=[room]))
    probe.turn("t-room", "안방이 좋아")
    probe.turn("t-s1", "안녕 로봇")
    with running_console(runtime.config) as console:
        path = f"/api/snapshot?utterance={quote('<b>안방</b> 청정')}"
        status, headers, body = console.request("GET", path, headers=authed(console))
        assert status == 200 and headers["content-type"] == "application/json; charset=utf-8"
        shown = json.loads(body.decode("utf-8"))
        assert shown["utterance"] == "<b>안방</b> 청정" and shown["bytes"] > 0
        assert "안녕 로봇".encode() in body  # UTF-8 as is, not \\u escapes
        assert "혈압".encode() not in body
        status, _, body = console.request("GET", "/api/overview", headers=authed(console))
        assert status == 200 and "혈압".encode() not in body  # nowhere on the page
        items = json.loads(body)["memory"]["by_status"]["candidate"]
        held = {item["key"]: item for item in items}
        assert held["condition"]["value"] is None
        assert "sensitive" in held["condition"]["withheld"]
        assert (
            held["preferred_room"]["value"] == "안방" and "withheld" not in held["preferred_room"]
        )
        assert held["condition"]["sources"]["pair"]  # provenance: ids only


TRICKLE_DEADLINE_S = 3.0  # the whole-request deadline for the trickle test (10 s in service)


@contextmanager
def _in_process_console(config: Path) -> Iterator[ConsoleServer]:
    """The console's server in this process (so its deadline can be shortened), no follower."""
    settings = load_settings(config)
    server = ConsoleServer(
        ("127.0.0.1", 0),
        settings=settings,
        token="t" * 32,
        changes=Changes(),
        canceller=Canceller(settings, load_secrets(settings)),
    )
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _status(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers={"Cookie": f"a2a_console_{port}={'t' * 32}"})
        return conn.getresponse().status
    finally:
        conn.close()


def _trickle(socks: list[socket.socket], stop: threading.Event) -> None:
    """A byte of the header on every connection, twice per deadline, until told to stop."""
    while not stop.wait(TRICKLE_DEADLINE_S / 2):
        for sock in socks:
            with contextlib.suppress(OSError):  # closed by the console: it stays closed
                sock.send(b"a")


def _closed_by_server(sock: socket.socket, until: float) -> bool:
    try:
        while True:
            sock.settimeout(max(0.01, until - time.monotonic()))
            if not sock.recv(4096):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_trickling_clients_do_not_lock_the_console_out(
    runtime_factory: RuntimeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outside attacker's report: 40 connections sending a header byte every few seconds
    held all 32 slots for as long as they kept on (each read was bounded, not the request), and
    the token's requests were answered 503. The whole request has a deadline now."""
    monkeypatch.setattr(console_http, "REQUEST_TIMEOUT_S", TRICKLE_DEADLINE_S, raising=False)
    runtime = runtime_factory()
    with _in_process_console(runtime.config) as server:
        port = server.server_address[1]
        stream = socket.create_connection(("127.0.0.1", port), timeout=5)
        stream.sendall(
            f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Cookie: a2a_console_{port}={'t' * 32}\r\n\r\n".encode()
        )
        _read_event(stream, "hello", time.monotonic() + 5)
        head = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-A: ".encode()
        socks = []
        for _ in range(40):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            socks[-1].sendall(head)
        started = time.monotonic()
        stop = threading.Event()
        trickler = threading.Thread(target=_trickle, args=(socks, stop), daemon=True)
        trickler.start()
        try:
            # every slot is held (a connection the full listen queue dropped comes ~1 s later)
            eventually(lambda: _status(port, "/api/overview") == 503, timeout_s=2.5)
            margin = TRICKLE_DEADLINE_S + 1.5
            eventually(lambda: _status(port, "/api/overview") == 200, timeout_s=margin)
            assert time.monotonic() - started < margin
            until = started + margin + 1.0  # those late ones: accepted up to ~1 s later
            assert all(_closed_by_server(sock, until) for sock in socks)
            # the event stream's request was complete: the deadline does not cut it off
            server.changes.bump({"what": "test"})
            assert _read_event(stream, "change", time.monotonic() + 5)["what"] == "test"
        finally:
            stop.set()
            trickler.join(timeout=5)
            for sock in [*socks, stream]:
                sock.close()
