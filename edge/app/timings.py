"""Where the device's time goes, as Prometheus histograms: a turn by phase, and a callback from
arrival to what it caused handed to the broker."""

from __future__ import annotations

import time

from a2a_common.stopwatch import Stopwatch
from edge.host.metrics import Metrics


def turn_answered(metrics: Metrics, watch: Stopwatch) -> None:
    """The device's own share of an answered turn: all but the time on the wire."""
    for phase, took in watch.laps.items():
        metrics.observe(
            "a2a_turn_phase_seconds", "an answered turn's time by phase", took, phase=phase
        )
    metrics.observe(
        "a2a_turn_device_seconds",
        "an answered turn on the device: arrival to answer and first command handed to"
        " the broker, less the time waiting on the cloud",
        watch.total() - watch.laps.get("cloud", 0.0),
    )


def callback_applied(metrics: Metrics, received_at: float) -> None:
    metrics.observe(
        "a2a_callback_device_seconds",
        "a task callback from arrival to applied, committed and what it caused handed to"
        " the broker",
        time.perf_counter() - received_at,
    )
