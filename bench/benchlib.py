"""Small helpers the benchmarks share."""

from __future__ import annotations


def pct(values: list[float], p: float) -> float:
    """The p-quantile (0..1) of `values`, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]
