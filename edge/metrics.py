"""An optional Prometheus text endpoint on localhost (`[metrics] enabled = true`), off by
default: counters kept in memory, gauges read when scraped."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable

log = logging.getLogger(__name__)


class Metrics:
    def __init__(self) -> None:
        self._counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
        self._help: dict[str, str] = {}

    def inc(self, name: str, help_text: str, n: float = 1.0, **labels: str) -> None:
        self._help[name] = help_text
        self._counters[(name, tuple(sorted(labels.items())))] += n

    def render(
        self, gauges: dict[str, tuple[str, dict[tuple[tuple[str, str], ...], float]]]
    ) -> str:
        """Prometheus text format: the counters, then `gauges` (name -> help, samples)."""
        lines: list[str] = []
        by_name: dict[str, list[tuple[tuple[tuple[str, str], ...], float]]] = defaultdict(list)
        for (name, labels), value in sorted(self._counters.items()):
            by_name[name].append((labels, value))
        for name, samples in by_name.items():
            lines += [f"# HELP {name} {self._help[name]}", f"# TYPE {name} counter"]
            lines += [f"{name}{_labels(labels)} {value:g}" for labels, value in samples]
        for name, (help_text, values) in gauges.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
            lines += [f"{name}{_labels(labels)} {value:g}" for labels, value in values.items()]
        return "\n".join(lines) + "\n"


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"


async def serve(host: str, port: int, render: Callable[[], str]) -> asyncio.Server:
    """GET /metrics → the text; anything else 404. One short request per connection."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            if request.split(b" ")[:2] == [b"GET", b"/metrics"]:
                body, status = render().encode(), b"200 OK"
            else:
                body, status = b"not found\n", b"404 Not Found"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; version=0.0.4"
                b"\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError) as exc:
            log.debug("metrics request dropped: %s", exc)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, host, port)
    log.info("metrics on http://%s:%d/metrics", host, port)
    return server
