"""Issue 23's figures side by side with their goals and peers, from the JSON the benches leave in
`$BENCH_OUT/<bench>.json` (`benchlib.record`; bench/run_all.sh sets BENCH_OUT). A figure whose
bench did not run (or did not record it) prints "not measured". Asserts nothing.

    BENCH_OUT=/tmp/bench .venv/bin/python -m bench.summary [--dir /tmp/bench]
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Figures = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Row:
    figure: str
    bench: str
    key: str
    unit: str
    goal: str
    met: Callable[[float], bool] | None = None  # None: no pass/fail (a measure to act on)
    peer: Callable[[Figures], str] | None = None


def get(figures: Figures, bench: str, key: str) -> Any:
    """A recorded figure; for bytes (bench.disk, written elsewhere) any key naming both."""
    values = figures.get(bench, {})
    if key in values or not key.startswith("bytes_per_"):
        return values.get(key)
    kind = key.removeprefix("bytes_per_")
    found = [v for k, v in values.items() if "byte" in k and kind in k]
    return found[0] if found else None


def floor_peer(kind: str) -> Callable[[Figures], str]:
    def peer(figures: Figures) -> str:
        base = get(figures, "floor", f"floor_cpu_us_per_{kind}")
        ratio = get(figures, "floor", f"ratio_per_{kind}")
        return f"floor {base} µs; ours/floor {ratio}×" if base is not None else ""

    return peer


def versus_floor(key: str, ratio: str, unit: str) -> Callable[[Figures], str]:
    """bench.floor's own figure for `floor_<key>` and ours/floor, measured in the same run."""

    def peer(figures: Figures) -> str:
        base = get(figures, "floor", f"floor_{key}")
        if base is None:
            return ""
        text = f"floor {base} {unit}; ours/floor {get(figures, 'floor', ratio)}×"
        if key.startswith("bytes_per_"):  # bench.disk's figure at a spoken turn's pace
            paced = get(figures, "disk", key)
            text += f"; bench.disk paced {paced} B" if paced is not None else ""
        return text

    return peer


def huey_peer(figures: Figures) -> str:
    rate = get(figures, "peers", "huey_paho_jobs_s")
    if rate is None:
        return ""
    workers = get(figures, "peers", "huey_paho_workers")
    return f"huey+paho {rate}/s ({workers} workers); ours/huey+paho {get(figures, 'peers', 'ours_over_huey_paho')}×"  # noqa: E501


def start_floor(figures: Figures) -> str:
    base = get(figures, "runtime", "floor_start_ms")
    ratio = get(figures, "runtime", "start_over_floor")
    return f"floor {base} ms; ours/floor {ratio}×" if base is not None else ""


def rss_floor(figures: Figures) -> str:
    base = get(figures, "runtime", "floor_rss_mb")
    over = get(figures, "runtime", "rss_over_floor_mb")
    return f"import floor {base} MB; ours − floor {over} MB" if base is not None else ""


def loaded_peer(figures: Figures) -> str:
    loaded = figures.get("loaded", {})
    if not loaded:
        return ""
    return (
        f"unloaded {loaded.get('unloaded_p99_ms')} ms; Nice={loaded.get('nice')}: "
        f"{loaded.get('at_unit_over_unloaded')}× unloaded; at nice 0 {loaded.get('loaded_p99_ms')}"
        f" ms ({loaded.get('loaded_over_unloaded')}×)"
    )


def fleet_peer(figures: Figures) -> str:
    fleet = figures.get("fleet", {})
    if not fleet:
        return ""
    return (
        f"{fleet.get('robots')} runtimes: RSS p50 {fleet.get('rss_mb_p50')} MB, CPU p50 "
        f"{fleet.get('cpu_pct_p50')} %, broker in/out {fleet.get('broker_publish_in_s')}/"
        f"{fleet.get('broker_publish_out_s')} PUBLISH/s"
    )


ROWS = (
    Row("PUI press → every task/cancel, p99", "floor", "ours_press_to_cancels_p99_ms", "ms",
        "≤ 2× the floor", None,
        versus_floor("press_to_cancels_p99_ms", "ratio_press_to_cancels_p99", "ms")),
    Row("step COMPLETED → dependant command, unloaded, p99", "floor",
        "ours_completed_to_command_p99_ms", "ms", "≤ 2× the floor", None,
        versus_floor("completed_to_command_p99_ms", "ratio_completed_to_command_p99", "ms")),
    Row("device share of a turn, p99", "floor", "ours_turn_device_p99_ms", "ms",
        "≤ 2× the floor", None,
        versus_floor("turn_device_p99_ms", "ratio_turn_device_p99", "ms")),
    Row("snapshot build, year of history, with relevance, p99", "snapshot", "focused_p99_ms",
        "ms", "< 1 ms", lambda v: v < 1),
    Row("snapshot build, 5 people + household, a year each, in turn, p99", "snapshot",
        "people5_focused_p99_ms", "ms", "< 1 ms", lambda v: v < 1),
    Row("cold start to READY=1 (year-old DB)", "runtime", "cold_start_ms", "ms",
        "≤ 2× the floor's start", None, start_floor),
    Row("steady RSS, runtime-only venv", "runtime", "steady_rss_mb", "MB",
        "≤ import floor + 15 MB", None, rss_floor),
    Row("PUI press → cancels, p99, cores saturated, unit's nice", "loaded",
        "loaded_at_unit_p99_ms", "ms", "≤ 3× unloaded p99", None, loaded_peer),
    Row("bytes written per turn", "floor", "ours_bytes_per_turn", "B", "≤ 2× the floor", None,
        versus_floor("bytes_per_turn", "ratio_bytes_per_turn", "B")),
    Row("bytes written per callback", "floor", "ours_bytes_per_callback", "B",
        "≤ 2× the floor", None,
        versus_floor("bytes_per_callback", "ratio_bytes_per_callback", "B")),
    Row("CPU per turn", "floor", "ours_cpu_us_per_turn", "µs", "≤ 2× the floor", None,
        floor_peer("turn")),
    Row("CPU per callback", "floor", "ours_cpu_us_per_callback", "µs", "≤ 2× the floor", None,
        floor_peer("callback")),
    Row("durable single-step jobs/s", "peers", "ours_jobs_s", "/s", "≥ 1.5× huey+paho", None,
        huey_peer),
    Row("fleet: errors (refusals, ERROR lines, unanswered, dead)", "fleet", "errors", "",
        "0", lambda v: v == 0, fleet_peer),
)  # fmt: skip
Goal = Callable[[float], bool]
RATIO_GOALS: dict[str, tuple[str, str, Goal]] = {
    "PUI press → every task/cancel, p99": ("floor", "ratio_press_to_cancels_p99", lambda r: r <= 2),
    "step COMPLETED → dependant command, unloaded, p99": (
        "floor",
        "ratio_completed_to_command_p99",
        lambda r: r <= 2,
    ),
    "device share of a turn, p99": ("floor", "ratio_turn_device_p99", lambda r: r <= 2),
    "bytes written per turn": ("floor", "ratio_bytes_per_turn", lambda r: r <= 2),
    "bytes written per callback": ("floor", "ratio_bytes_per_callback", lambda r: r <= 2),
    "CPU per turn": ("floor", "ratio_per_turn", lambda r: r <= 2),
    "CPU per callback": ("floor", "ratio_per_callback", lambda r: r <= 2),
    "durable single-step jobs/s": ("peers", "ours_over_huey_paho", lambda r: r >= 1.5),
    "cold start to READY=1 (year-old DB)": ("runtime", "start_over_floor", lambda r: r <= 2),
    "steady RSS, runtime-only venv": ("runtime", "rss_over_floor_mb", lambda d: d <= 15),
    "PUI press → cancels, p99, cores saturated, unit's nice": (
        "loaded",
        "at_unit_over_unloaded",
        lambda r: r <= 3,
    ),
}


def load(folder: Path) -> Figures:
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def verdict(row: Row, figures: Figures, value: Any) -> str:
    if row.figure in RATIO_GOALS:
        bench, key, ok = RATIO_GOALS[row.figure]
        ratio = get(figures, bench, key)
        return "" if ratio is None else ("met" if ok(ratio) else "not yet")
    if row.met is None or not isinstance(value, int | float):
        return ""
    return "met" if row.met(value) else "not yet"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default=os.environ.get("BENCH_OUT", ""))
    args = parser.parse_args()
    if not args.dir:
        parser.error("give --dir or set BENCH_OUT")
    figures = load(Path(args.dir))
    head = f"{'figure':<58} {'ours':>12}  {'goal':<22} {'':<8} peer / detail"
    print("issue 23: every figure in one table")
    print(head)
    print("-" * len(head))
    for row in ROWS:
        value = get(figures, row.bench, row.key)
        shown = "not measured" if value is None else f"{value} {row.unit}".strip()
        peer = row.peer(figures) if row.peer else ""
        print(
            f"{row.figure:<58} {shown:>12}  {row.goal:<22} {verdict(row, figures, value):<8} {peer}"
        )


if __name__ == "__main__":
    main()
