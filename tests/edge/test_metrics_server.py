"""The bounds of the `/metrics` server, in-process (the real process is in
tests/reliability/test_metrics_port.py), and the config that guards its address."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from edge.config.errors import ConfigError
from edge.config.settings import MetricsSettings, load_settings
from edge.host import metrics_server
from edge.host.metrics import Metrics
from sim.broker import free_port


def settings(**values: Any) -> MetricsSettings:
    base: dict[str, Any] = {"enabled": True, "port": free_port(), "request_timeout_s": 0.5}
    return MetricsSettings(**{**base, **values})


def with_server(
    s: MetricsSettings, body: Callable[[Metrics], Awaitable[None]], render: str = "x 1\n"
) -> Metrics:
    counters = Metrics()

    async def main() -> None:
        server = await metrics_server.serve(s, lambda: render, counters)
        try:
            await body(counters)
        finally:
            server.close()

    asyncio.run(main())
    return counters


async def exchange(port: int, request: bytes) -> bytes:
    """Send `request`, then read until the server closes; b"" when it reset us."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 5)
    except ConnectionError:
        return b""
    finally:
        writer.close()


def test_get_metrics_and_the_other_answers() -> None:
    s = settings()
    answers: list[bytes] = []

    async def body(_: Metrics) -> None:
        for request in (
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /metrics?name=x HTTP/1.0\n\n",
            b"GET / HTTP/1.1\r\n\r\n",
            b"POST /metrics HTTP/1.1\r\n\r\n",
            b"nonsense\r\n\r\n",
        ):
            answers.append(await exchange(s.port, request))

    with_server(s, body)
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 404 Not Found",
        b"HTTP/1.1 405 Method Not Allowed",
        b"HTTP/1.1 400 Bad Request",
    ]
    assert answers[0].endswith(b"\r\n\r\nx 1\n")


def test_a_request_over_the_size_cap_is_answered_431_in_full(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = settings(max_request_bytes=1024)
    answers: list[bytes] = []

    async def body(_: Metrics) -> None:
        answers.append(await exchange(s.port, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n"))
        headers = b"".join(b"X-%d: y\r\n" % n for n in range(200))
        answers.append(await exchange(s.port, b"GET /metrics HTTP/1.1\r\n" + headers + b"\r\n"))

    counters = with_server(s, body)
    assert all(a.startswith(b"HTTP/1.1 431 ") for a in answers), answers
    assert 'a2a_metrics_rejected_total{reason="too_large"} 2' in counters.render().decode()


def test_a_trickling_client_is_dropped_at_the_deadline() -> None:
    s = settings(request_timeout_s=0.4)
    lived: list[float] = []

    async def body(_: Metrics) -> None:
        loop = asyncio.get_running_loop()
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
        start = loop.time()
        writer.write(b"GET /metrics HTTP/1.1\r\n")

        async def trickle() -> None:  # a header line every 0.1 s: never a whole request
            while True:
                await asyncio.sleep(0.1)
                writer.write(b"X-a: b\r\n")

        task = asyncio.create_task(trickle())
        with contextlib.suppress(ConnectionError):
            assert await asyncio.wait_for(reader.read(), 3) == b""
        lived.append(loop.time() - start)
        task.cancel()
        writer.close()

    with_server(s, body)
    assert 0.3 < lived[0] < 1.0


def test_connections_past_the_cap_are_closed_at_once_and_logged_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics_server, "QUIET_S", 0.8)
    s = settings(max_connections=4, request_timeout_s=0.6)
    extra: list[bytes] = []
    after: list[bytes] = []

    async def body(_: Metrics) -> None:
        held = [await asyncio.open_connection("127.0.0.1", s.port) for _ in range(4)]
        for _ in range(10):
            extra.append(await exchange(s.port, b""))
        for reader, _writer in held:  # dropped at the deadline
            assert await asyncio.wait_for(reader.read(), 2) == b""
        await asyncio.sleep(1.0)  # the episode's quiet time (0.8 s) passes
        after.append(await exchange(s.port, b"GET /metrics HTTP/1.1\r\n\r\n"))

    with caplog.at_level(logging.INFO, logger="edge.host.metrics_server"):
        counters = with_server(s, body)
    assert extra == [b""] * 10
    assert after[0].startswith(b"HTTP/1.1 200 OK")
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "refused at the connection cap" in warnings[0]
    infos = [r.getMessage() for r in caplog.records if "quiet again" in r.getMessage()]
    assert len(infos) == 1
    assert infos[0].endswith(
        ": 10 refused at the connection cap, 4 dropped at the request deadline"
    )
    text = counters.render().decode()
    assert 'a2a_metrics_rejected_total{reason="cap"} 10' in text
    assert 'a2a_metrics_rejected_total{reason="deadline"} 4' in text


def test_a_failing_render_is_a_500_with_one_traceback(caplog: pytest.LogCaptureFixture) -> None:
    s = settings()
    answers: list[bytes] = []

    def broken() -> str:
        raise RuntimeError("db gone")

    async def main() -> None:
        server = await metrics_server.serve(s, broken, Metrics())
        for _ in range(3):
            answers.append(await exchange(s.port, b"GET /metrics HTTP/1.1\r\n\r\n"))
        server.close()

    asyncio.run(main())
    assert {a.split(b"\r\n", 1)[0] for a in answers} == {b"HTTP/1.1 500 Internal Server Error"}
    assert len([r for r in caplog.records if r.exc_info]) == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_hosts_are_accepted(host: str) -> None:
    assert load_settings(None, {"A2A_EDGE_METRICS__HOST": host}).metrics.host == host


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.168.1.20", "robot.local"])
def test_other_hosts_need_allow_remote(host: str) -> None:
    env = {"A2A_EDGE_METRICS__HOST": host}
    with pytest.raises(ConfigError) as caught:
        load_settings(None, env)
    assert caught.value.key == "metrics.host"
    assert "metrics.allow_remote = true" in str(caught.value)
    allowed = load_settings(None, {**env, "A2A_EDGE_METRICS__ALLOW_REMOTE": "true"})
    assert allowed.metrics.host == host


def test_allow_remote_is_warned_about_at_every_start(caplog: pytest.LogCaptureFixture) -> None:
    async def nothing(_: Metrics) -> None:
        return None

    with_server(settings(), nothing)
    with_server(settings(allow_remote=True), nothing)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("metrics.allow_remote = true: ")


def test_the_unit_leaves_room_for_the_largest_cap() -> None:
    unit = Path(__file__).parents[2] / "systemd" / "a2a-edge.service"
    match = re.search(r"^LimitNOFILE=(\d+)$", unit.read_text(), re.MULTILINE)
    assert match
    field = MetricsSettings.model_fields["max_connections"]
    (largest,) = [m.le for m in field.metadata if hasattr(m, "le")]
    assert int(match.group(1)) >= 2 * largest


def test_a_cap_the_descriptor_limit_cannot_hold_is_lowered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = settings(max_connections=64)
    assert metrics_server.fit_to_rlimit(s, 1024) is s
    assert metrics_server.fit_to_rlimit(s, 160).max_connections == 32
    assert caplog.messages == [
        "metrics: RLIMIT_NOFILE is 160: at most 32 connections, not metrics.max_connections = 64"
    ]
