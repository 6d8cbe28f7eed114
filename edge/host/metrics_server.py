"""The `/metrics` endpoint: one short HTTP/1.x GET per connection, served on the loop with
explicit bounds, so that slow or hostile clients cannot take the process's descriptors.

- At most `max_connections` open at once; one more is closed at once (RST), before a byte is
  read. 1,100 clients trickling a header line every 3 s had filled all 1,024 descriptors of the
  unbounded server: turns went `offline`, and asyncio logged an ERROR for every failed accept.
  A cap that RLIMIT_NOFILE cannot hold (with RESERVE left over) is lowered at start.
- A whole-request deadline (`request_timeout_s`) from accept, however the request trickles in;
  the response then gets the same time again to be taken.
- Request line + headers at most `max_request_bytes` (431, then the rest is read and dropped
  until the client closes or the deadline ends it: closing on unread data would send a RST
  in place of the answer).
- Trouble is logged once per episode: a WARNING when it starts, an INFO line with the counts
  once it has been quiet for QUIET_S; `a2a_metrics_rejected_total{reason}` counts each case.

An `asyncio.Protocol`, not streams: no task and no reader per connection, and every bound is a
plain check in a callback. The metrics themselves are prometheus_client's (edge/host/metrics.py:
`generate_latest()` is what `render` returns); its own servers are not used:
`start_http_server` is a `ThreadingHTTPServer`, a thread per connection with no cap and no
whole-request deadline (the slow-client attack of tests/reliability/test_metrics_port.py
takes its threads and descriptors), and its render would run on that thread while the
scrape-time values read the state DB, which only the loop may touch.
"""

from __future__ import annotations

import asyncio
import logging
import re
import resource
from collections import Counter
from collections.abc import Callable

from edge.config.settings import MetricsSettings, is_loopback
from edge.host.metrics import Metrics

log = logging.getLogger(__name__)

QUIET_S = 10.0  # an episode ends after this long without a refused or dropped connection
# the listen queue, and so how many connections one loop iteration accepts; asyncio closes a
# refused one three iterations after its accept, so the server holds at most
# max_connections + 3 * BACKLOG descriptors (the reliability test met that figure exactly)
BACKLOG = 16
RESERVE = 128  # descriptors left to the rest of the runtime (~20) and to accept batches
END_OF_HEAD = re.compile(rb"\r?\n\r?\n")
REASONS = {
    "cap": "refused at the connection cap",
    "deadline": "dropped at the request deadline",
    "too_large": "too large",
    "malformed": "malformed",
    "render_failed": "answered 500 (the render failed)",
}


class Episode:
    """Counts refused and dropped connections; logs when trouble starts and when it is over."""

    def __init__(self, settings: MetricsSettings, counters: Metrics) -> None:
        self._settings = settings
        self._counters = counters
        self._counts: Counter[str] = Counter()
        self._started = 0.0
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def note(self, reason: str, exc: Exception | None = None) -> None:
        self._counters.inc(
            "a2a_metrics_rejected_total",
            "connections to /metrics refused or dropped, by reason",
            reason=reason,
        )
        loop = asyncio.get_running_loop()
        self._last = loop.time()
        self._counts[reason] += 1
        if self._timer is None:
            self._started = self._last
            s = self._settings
            log.warning(
                "metrics: a client was %s (bounds: %d connections, %g s per request, %d bytes);"
                " further ones are counted, not logged, until %g s pass without one",
                REASONS[reason],
                s.max_connections,
                s.request_timeout_s,
                s.max_request_bytes,
                QUIET_S,
                exc_info=exc,
            )
            self._timer = loop.call_later(QUIET_S, self._check)

    def _check(self) -> None:
        loop = asyncio.get_running_loop()
        quiet_since = loop.time() - self._last
        if quiet_since < QUIET_S:
            self._timer = loop.call_later(QUIET_S - quiet_since, self._check)
            return
        self._timer = None
        counts = ", ".join(f"{n} {REASONS[r]}" for r, n in sorted(self._counts.items()))
        log.info("metrics: quiet again after %.0f s: %s", self._last - self._started, counts)
        self._counts.clear()


class _Bounds:
    """What every connection of one server shares: the limits, the open count, the episode."""

    def __init__(
        self, settings: MetricsSettings, render: Callable[[], str | bytes], counters: Metrics
    ) -> None:
        self.settings = settings
        self.render = render
        self.episode = Episode(settings, counters)
        self.open = 0


class _Connection(asyncio.Protocol):
    def __init__(self, bounds: _Bounds) -> None:
        self._bounds = bounds
        self._transport: asyncio.Transport | None = None
        self._head = bytearray()
        self._answered = False
        self._counted = False
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        bounds = self._bounds
        if bounds.open >= bounds.settings.max_connections:
            bounds.episode.note("cap")
            transport.abort()
            return
        bounds.open += 1
        self._counted = True
        self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._bounds.settings.request_timeout_s, self._expire)

    def _expire(self) -> None:
        self._timer = None
        if not self._answered:
            self._bounds.episode.note("deadline")
        if self._transport is not None:
            self._transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._answered:
            return  # the rest of a refused request: read and dropped
        self._head += data
        limit = self._bounds.settings.max_request_bytes
        end = END_OF_HEAD.search(self._head)
        if end is None and len(self._head) <= limit:
            return  # not all there yet
        if end is None or end.end() > limit:
            self._refuse("too_large", b"431 Request Header Fields Too Large")
            return
        self._respond(bytes(self._head[: end.start()]).split(b"\n", 1)[0].rstrip(b"\r"))

    def _respond(self, request_line: bytes) -> None:
        parts = request_line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            self._refuse("malformed", b"400 Bad Request")
            return
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method != b"GET":
            self._send(b"405 Method Not Allowed", b"only GET\n", b"Allow: GET\r\n")
        elif target != b"/metrics":
            self._send(b"404 Not Found", b"not found\n")
        else:
            try:
                rendered = self._bounds.render()
                body = rendered.encode() if isinstance(rendered, str) else rendered
            except Exception as exc:  # an answer, never a traceback per scrape
                self._bounds.episode.note("render_failed", exc)
                self._send(b"500 Internal Server Error", b"render failed\n")
            else:
                self._send(b"200 OK", body)
        assert self._transport is not None
        self._transport.close()

    def _refuse(self, reason: str, status: bytes) -> None:
        """Answer, then read and drop what still comes until the client closes (or the
        deadline): a close with unread bytes would send a RST that loses the answer."""
        self._bounds.episode.note(reason)
        self._send(status, status[4:].lower() + b"\n")
        assert self._transport is not None
        if self._transport.can_write_eof():
            self._transport.write_eof()
        else:
            self._transport.close()

    def _send(self, status: bytes, body: bytes, extra: bytes = b"") -> None:
        assert self._transport is not None
        self._answered = True
        self._head.clear()
        self._arm()  # the answer gets its own deadline to be taken
        self._transport.write(
            b"HTTP/1.1 "
            + status
            + b"\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            + extra
            + b"Content-Length: "
            + str(len(body)).encode()
            + b"\r\nConnection: close\r\n\r\n"
            + body
        )

    def eof_received(self) -> bool:
        return False  # the client is done sending: close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._counted:
            self._counted = False
            self._bounds.open -= 1
        self._transport = None


async def serve(
    settings: MetricsSettings, render: Callable[[], str | bytes], counters: Metrics
) -> asyncio.Server:
    """GET /metrics → `render()`; other paths 404, other methods 405; bounded as above."""
    settings = fit_to_rlimit(settings, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    bounds = _Bounds(settings, render, counters)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Connection(bounds), settings.host, settings.port, backlog=BACKLOG
    )
    log.info("metrics on http://%s:%d/metrics", settings.host, settings.port)
    if settings.allow_remote:  # at every start while it is allowed
        log.warning(
            "metrics.allow_remote = true: /metrics (no authentication) on %s, %s",
            settings.host,
            "loopback for now" if is_loopback(settings.host) else "reachable from other hosts",
        )
    return server


def fit_to_rlimit(settings: MetricsSettings, nofile: int) -> MetricsSettings:
    """A cap the descriptor limit cannot hold would only move the exhaustion (and asyncio's
    ERROR line for every refused accept) to the limit: lower it, and say so."""
    room = max(1, nofile - RESERVE)
    if nofile == resource.RLIM_INFINITY or settings.max_connections <= room:
        return settings
    log.warning(
        "metrics: RLIMIT_NOFILE is %d: at most %d connections, not metrics.max_connections = %d",
        nofile,
        room,
        settings.max_connections,
    )
    return settings.model_copy(update={"max_connections": room})
