"""Counters and summaries in the Prometheus text format."""

from __future__ import annotations

from edge.metrics import WINDOW, Metrics


def test_summary_quantiles_over_the_latest_window_with_sum_and_count() -> None:
    metrics = Metrics()
    for value in range(1, 101):
        metrics.observe("a2a_x_seconds", "x", value / 1000, phase="a")
    metrics.inc("a2a_y_total", "y", status="ok")
    text = metrics.render({})
    assert "# TYPE a2a_x_seconds summary" in text
    assert 'a2a_x_seconds{phase="a",quantile="0.5"} 0.051' in text
    assert 'a2a_x_seconds{phase="a",quantile="0.99"} 0.1' in text
    assert 'a2a_x_seconds_count{phase="a"} 100' in text
    assert 'a2a_x_seconds_sum{phase="a"} 5.05' in text
    assert 'a2a_y_total{status="ok"} 1' in text


def test_summary_window_forgets_old_values_but_not_the_count() -> None:
    metrics = Metrics()
    for _ in range(WINDOW):
        metrics.observe("a2a_x_seconds", "x", 9.0)
    for _ in range(WINDOW):
        metrics.observe("a2a_x_seconds", "x", 1.0)
    text = metrics.render({})
    assert 'a2a_x_seconds{quantile="0.99"} 1' in text
    assert f"a2a_x_seconds_count {2 * WINDOW}" in text
