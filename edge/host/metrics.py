"""What the optional Prometheus endpoint (`[metrics] enabled = true`, served by
edge/host/metrics_server.py) shows, kept with prometheus_client, the field's library: counters
(`_total`) and histograms kept in memory (always: they are cheap), values read from the state
DB when scraped (a collector the runtime registers), the `process_*` and `python_*` collectors
and `a2a_build_info`.

Latencies are histograms, not summaries: a fleet aggregates buckets across robots (a quantile
of quantiles means nothing), and `histogram_quantile()` gives the percentiles. One registry per
`Metrics` (not the library's global one): a process may hold several (tests, the bench).

A labelled metric keeps at most MAX_SERIES label sets; past them new values go to one series
whose labels all say `other`, so no input (a flood of made-up topics) can grow it without end.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics import Info
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from edge import __version__

# no `_created` series: a third more lines that nobody graphs
disable_created_metrics()  # type: ignore[no-untyped-call]
MAX_SERIES = 64
OTHER = "other"
# seconds: a turn's device share is ~1-10 ms, a phase less, the cloud 50 ms-4 s
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
BUCKETS = {
    "a2a_inbound_batch_messages": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
    "a2a_gc_pause_seconds": (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1),
}
Labels = tuple[tuple[str, str], ...]
Reader = Callable[[], Iterable[Metric]]


class ProcSubsetProcess(ProcessCollector):
    """`process_*` also under the unit's `ProcSubset=pid`, where /proc/stat (the boot time the
    library reads first, and without which it reports nothing at all) is hidden: the boot
    time is then the wall clock less CLOCK_BOOTTIME, which is what the kernel's `btime` is."""

    def _boot_time(self) -> float:
        try:
            found = super()._boot_time()  # type: ignore[no-untyped-call]
        except OSError:
            found = None
        return float(found) if found else time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


class _AtScrape(Collector):
    """Families read when scraped (gauges over the state DB, counters kept elsewhere)."""

    def __init__(self) -> None:
        self.readers: list[Reader] = []

    def collect(self) -> Iterable[Metric]:
        for read in self.readers:
            yield from read()

    def describe(self) -> Iterable[Metric]:
        return []  # read only when scraped: never at registration


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._made: dict[str, Any] = {}
        self._series: dict[str, set[tuple[str, ...]]] = {}
        self._at_scrape = _AtScrape()
        self.registry.register(self._at_scrape)
        ProcSubsetProcess(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        build = Info("a2a_build", "the running a2a-edge", registry=self.registry)
        build.info({"version": __version__, "python": platform.python_version()})

    def inc(self, name: str, help_text: str, n: float = 1.0, **labels: str) -> None:
        """`name` ends in `_total` (prometheus_client keeps the suffix)."""
        made = self._made.get(name)
        if made is None:
            made = self._made[name] = Counter(
                name, help_text, sorted(labels), registry=self.registry
            )
        self._child(name, made, labels).inc(n)

    def observe(self, name: str, help_text: str, value: float, **labels: str) -> None:
        made = self._made.get(name)
        if made is None:
            buckets = BUCKETS.get(name, LATENCY_BUCKETS)
            made = self._made[name] = Histogram(
                name, help_text, sorted(labels), registry=self.registry, buckets=buckets
            )
        self._child(name, made, labels).observe(value)

    def _child(self, name: str, made: Any, labels: dict[str, str]) -> Any:
        if not labels:
            return made
        values = tuple(str(labels[key]) for key in sorted(labels))
        seen = self._series.setdefault(name, set())
        if values not in seen:
            if len(seen) >= MAX_SERIES:
                values = tuple(OTHER for _ in values)
            seen.add(values)
        return made.labels(*values)

    def read_at_scrape(self, reader: Reader) -> None:
        self._at_scrape.readers.append(reader)

    def render(self) -> bytes:
        """The Prometheus text format of everything above."""
        return generate_latest(self.registry)


def gauge(name: str, help_text: str, values: dict[Labels, float]) -> GaugeMetricFamily:
    """A gauge family of one or more label sets (all with the same label names)."""
    names = [key for key, _ in next(iter(values), ())]
    family = GaugeMetricFamily(name, help_text, labels=names)
    for labels, value in values.items():
        family.add_metric([v for _, v in labels], value)
    return family


def counter(name: str, help_text: str, value: float) -> CounterMetricFamily:
    """A counter kept elsewhere (e.g. the replayer's), read when scraped; `name` without
    `_total`, which the exposition adds."""
    return CounterMetricFamily(name, help_text, value=value)
