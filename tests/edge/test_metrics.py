"""Metrics in Prometheus conventions, kept with prometheus_client: `_total` counters, latency
histograms (a fleet can aggregate them), process_* and build info, bounded label sets."""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.process_collector import ProcessCollector

from edge import __version__
from edge.host.metrics import MAX_SERIES, OTHER, Metrics, ProcSubsetProcess, counter, gauge


def families(metrics: Metrics) -> dict[str, object]:
    text = metrics.render().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(metrics: Metrics) -> dict[str, float]:
    text = metrics.render().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def test_latencies_are_histograms_and_counters_end_in_total() -> None:
    metrics = Metrics()
    for value in range(1, 101):
        metrics.observe("a2a_x_seconds", "x", value / 1000, phase="a")
    metrics.inc("a2a_y_total", "y", status="ok")
    text = metrics.render().decode()
    assert "# TYPE a2a_x_seconds histogram" in text and "summary" not in text
    got = samples(metrics)
    assert got['a2a_x_seconds_bucket{le="0.01",phase="a"}'] == 10
    assert got['a2a_x_seconds_bucket{le="+Inf",phase="a"}'] == 100
    assert got['a2a_x_seconds_count{phase="a"}'] == 100
    assert abs(got['a2a_x_seconds_sum{phase="a"}'] - 5.05) < 1e-9
    assert "# TYPE a2a_y_total counter" in text and got['a2a_y_total{status="ok"}'] == 1


def test_process_python_and_build_info_are_there() -> None:
    got = samples(Metrics())
    assert got["process_resident_memory_bytes"] > 1e6
    assert "process_open_fds" in got and "process_cpu_seconds_total" in got
    assert any(name.startswith("python_info{") for name in got)
    assert (
        got[
            f'a2a_build_info{{python="{__import__("platform").python_version()}",version="{__version__}"}}'
        ]
        == 1
    )


def test_values_read_at_scrape_time() -> None:
    metrics = Metrics()
    depth = [3.0]
    metrics.read_at_scrape(
        lambda: [
            gauge("a2a_depth", "d", {(): depth[0]}),
            gauge("a2a_by", "b", {(("queue", "sync"),): 1, (("queue", "inbound"),): 2}),
            counter("a2a_acked", "a", 7),
        ]
    )
    assert samples(metrics)["a2a_depth"] == 3
    depth[0] = 5
    got = samples(metrics)
    assert got["a2a_depth"] == 5 and got['a2a_by{queue="inbound"}'] == 2
    assert got["a2a_acked_total"] == 7
    assert "# TYPE a2a_acked_total counter" in metrics.render().decode()


def test_a_flood_of_label_values_stays_bounded() -> None:
    metrics = Metrics()
    for n in range(MAX_SERIES + 500):
        metrics.inc("a2a_refusals_total", "r", topic=f"made/up/{n}", error="unknown_topic")
    got = {k: v for k, v in samples(metrics).items() if k.startswith("a2a_refusals_total")}
    assert len(got) == MAX_SERIES + 1
    assert got[f'a2a_refusals_total{{error="{OTHER}",topic="{OTHER}"}}'] == 500


def test_process_metrics_survive_procsubset_pid(tmp_path: Path) -> None:
    """systemd's ProcSubset=pid hides /proc/stat: prometheus_client's own collector then
    reports no process_* metric at all (it needs the boot time from there first)."""
    fake = tmp_path / "proc"  # /proc as the unit shows it: the process's own dir, no stat file
    fake.mkdir()
    (fake / "self").symlink_to("/proc/self")
    plain, ours = CollectorRegistry(), CollectorRegistry()
    ProcessCollector(proc=str(fake), registry=plain)
    ProcSubsetProcess(proc=str(fake), registry=ours)
    assert plain.get_sample_value("process_resident_memory_bytes") is None
    assert (ours.get_sample_value("process_resident_memory_bytes") or 0) > 1e6
    started = ours.get_sample_value("process_start_time_seconds") or 0
    assert abs(started - ProcessCollector(registry=None)._boot_time() - _ticks_since_boot()) < 2


def _ticks_since_boot() -> float:
    parts = Path("/proc/self/stat").read_text().split(")")[-1].split()
    return float(parts[19]) / os.sysconf("SC_CLK_TCK")
