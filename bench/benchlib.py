"""Small helpers the benchmarks share."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx

from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.processes import RuntimeProcess, write_config


def record(name: str, key: str, value: float | int | str) -> None:
    """Keep one key figure of bench `name` in `$BENCH_OUT/<name>.json` (nothing without
    $BENCH_OUT); `python -m bench.summary` prints them side by side with the goals."""
    out = os.environ.get("BENCH_OUT")
    if not out:
        return
    path = Path(out) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    figures = json.loads(path.read_text()) if path.exists() else {}
    figures[key] = value
    path.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")


def pct(values: list[float], p: float) -> float:
    """The p-quantile (0..1) of `values`, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def proc_stat(pid: int) -> tuple[int, float]:
    """(RSS kB, CPU seconds) of a process."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss, (int(fields[11]) + int(fields[12])) / ticks


def runtime_stack(
    work: Path,
    metrics_port: int | None = None,
    python: str | None = None,
    sections: dict[str, Any] | None = None,
) -> tuple[Mosquitto, SimCloud, RuntimeProcess]:
    """A private Mosquitto, the sim cloud, and `robot-bench`'s runtime (not started yet),
    with its /metrics on `metrics_port` when given, run by `python` when given: then as that
    venv installed it (its byte code compiled by pip, as on a robot), not from this tree; and
    more config `sections` (e.g. `{"taskmanager": {"cancel_confirm_s": 0.5}}`) when given."""
    broker = Mosquitto(work / "broker")
    broker.start()
    cloud = SimCloud().start()
    values: dict[str, Any] = {
        "device_id": "robot-bench",
        "state_dir": str(work / "state"),
        "mqtt": {"port": broker.port},
        "cloud": {"base_url": cloud.url},
        "log": {"level": "WARNING"},
    }
    if metrics_port is not None:
        values["metrics"] = {"enabled": True, "port": metrics_port}
    values.update(sections or {})
    config = write_config(work / "config.toml", values)
    if python is None:
        return broker, cloud, RuntimeProcess(config, work)
    # an absolute path that is still the venv's own (resolving the link would leave the venv)
    runtime = RuntimeProcess(config, work, python=os.path.abspath(python), cwd=work)
    return broker, cloud, runtime


def scrape(port: int) -> dict[str, float]:
    """The runtime's /metrics as `name{labels}` -> value."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def _labels(text: str) -> dict[str, str]:
    """`a="1",b="2"` -> {"a": "1", "b": "2"} (our label values hold no quotes or commas)."""
    pairs = (part.split("=", 1) for part in text.split(",") if part)
    return {key: value.strip('"') for key, value in pairs}


def quantile(samples: dict[str, float], name: str, q: float, labels: str = "") -> float:
    """`histogram_quantile(q, …)` of a histogram in `scrape()`'s samples, as Prometheus
    computes it (linear within the bucket); `labels` e.g. `phase="cloud",` selects the series
    (matched by name and value, in whatever order the exposition writes them: it puts `le`
    first)."""
    wanted = _labels(labels)
    head = f"{name}_bucket{{"
    buckets = []
    for key, count in samples.items():
        if not key.startswith(head):
            continue
        found = _labels(key[len(head) : -1])
        le = found.pop("le", None)
        if le is not None and found == wanted:
            buckets.append((float(le), count))
    buckets.sort()
    total = buckets[-1][1] if buckets else 0.0
    if not total:
        return 0.0
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = bound, count
    return lower


def instant_agents(port: int, root: str, *operations: str) -> DeviceAgents:
    """Device agents answering each `capability.operation` at once (RUNNING, COMPLETED)."""
    return DeviceAgents(port, root, behaviors={op: Behavior("instant") for op in operations})


def stop_all(*parts: Any) -> None:
    """Close clients and the runtime, stop servers, in the order given."""
    for part in parts:
        stop = getattr(part, "close", None) or part.stop
        stop()
