"""What the optional Prometheus endpoint (`[metrics] enabled = true`, served by
edge/metrics_server.py) shows: counters and summaries kept in memory (always, they are cheap),
gauges read when scraped. Summaries give quantiles over their latest `WINDOW` observations."""

from __future__ import annotations

from array import array
from collections import defaultdict

WINDOW = 2048
QUANTILES = (0.5, 0.9, 0.99)
Labels = tuple[tuple[str, str], ...]


class _Summary:
    """A ring of the latest WINDOW values as raw doubles (8 bytes each, not float objects)."""

    def __init__(self) -> None:
        self.recent = array("d")
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        if len(self.recent) < WINDOW:
            self.recent.append(value)
        else:
            self.recent[self.count % WINDOW] = value
        self.total += value
        self.count += 1

    def quantiles(self, qs: tuple[float, ...]) -> list[float]:
        """Nearest-rank quantiles of the window, sorted once."""
        ordered = sorted(self.recent)
        if not ordered:
            return [0.0 for _ in qs]
        return [ordered[min(len(ordered) - 1, int(len(ordered) * q))] for q in qs]


class Metrics:
    def __init__(self) -> None:
        self._counters: dict[tuple[str, Labels], float] = defaultdict(float)
        self._summaries: dict[tuple[str, Labels], _Summary] = defaultdict(_Summary)
        self._help: dict[str, str] = {}

    def inc(self, name: str, help_text: str, n: float = 1.0, **labels: str) -> None:
        self._help[name] = help_text
        self._counters[(name, tuple(sorted(labels.items())))] += n

    def observe(self, name: str, help_text: str, value: float, **labels: str) -> None:
        self._help[name] = help_text
        self._summaries[(name, tuple(sorted(labels.items())))].observe(value)

    def render(self, gauges: dict[str, tuple[str, dict[Labels, float]]]) -> str:
        """Prometheus text format: counters, summaries, then `gauges` (name -> help, samples)."""
        lines: list[str] = []
        by_name: dict[str, list[tuple[Labels, float]]] = defaultdict(list)
        for (name, labels), value in sorted(self._counters.items()):
            by_name[name].append((labels, value))
        for name, samples in by_name.items():
            lines += [f"# HELP {name} {self._help[name]}", f"# TYPE {name} counter"]
            lines += [f"{name}{_labels(labels)} {value:g}" for labels, value in samples]
        typed: set[str] = set()
        for (name, labels), summary in sorted(self._summaries.items()):
            if name not in typed:
                typed.add(name)
                lines += [f"# HELP {name} {self._help[name]}", f"# TYPE {name} summary"]
            lines += [
                f"{name}{_labels((*labels, ('quantile', f'{q:g}')))} {value:g}"
                for q, value in zip(QUANTILES, summary.quantiles(QUANTILES), strict=True)
            ]
            lines.append(f"{name}_sum{_labels(labels)} {summary.total:g}")
            lines.append(f"{name}_count{_labels(labels)} {summary.count}")
        for name, (help_text, values) in gauges.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
            lines += [f"{name}{_labels(labels)} {value:g}" for labels, value in values.items()]
        return "\n".join(lines) + "\n"


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"
