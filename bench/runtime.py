"""The runtime as its users feel it, on a year-old cache: cold start to READY (and the first
start after an upgrade that changed the lexicon, which labels every stored text again), turn
round trip through Mosquitto with the sim cloud answering at once, the device's own share of
each turn (everything but the time on the wire to the cloud, by phase, from the runtime's
/metrics),
steady RSS, CPU while idle, DB growth per 1,000 turns. Half the turns start a two-step
workflow that instant device agents run. Beside ours, in the same run and by the same
interpreter, the footprint floor (issue 36, bench/footprint.py): the design card's libraries
imported and one model of each kind built, a copy of the same DB opened, the same broker
subscribed, READY=1 sent the same way; its starts interleaved with ours, its RSS read with
ours. Prints figures; asserts nothing.

    .venv/bin/python -m bench.runtime [--turns 1000] [--starts 5] [--python VENV/bin/python]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from a2a_common.sqlite import open_state_db
from bench.benchlib import (
    instant_agents,
    pct,
    proc_stat,
    quantile,
    record,
    runtime_stack,
    scrape,
    stop_all,
)
from bench.footprint import ImportFloor, copy_db
from bench.snapshot import fill
from cache.relabel import FINGERPRINT_KEY
from edge.store.schema import MIGRATIONS
from sim.broker import free_port
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess

ROOT = "a2a/robot-bench"
TEXTS = ("오늘 날씨 어때?", "안방으로 가서 청정해줘")
PHASES = ("take_in", "record", "queue", "snapshot", "encode", "decode", "apply")


def turns(probe: MqttProbe, count: int, gap_s: float = 0.0, tag: str = "b") -> list[float]:
    """`count` turns, each `gap_s` after the previous answer; each one's round trip in ms."""
    took = []
    for n in range(count):
        start = time.perf_counter()
        probe.turn(f"{tag}{n}", TEXTS[n % 2])
        took.append((time.perf_counter() - start) * 1000)
        time.sleep(gap_s)
    return took


def cpu_s(runtime: RuntimeProcess) -> float:
    """CPU seconds (user + system) the runtime process has used so far."""
    assert runtime.proc is not None
    return proc_stat(runtime.proc.pid)[1]


def year_old_db(path: Path) -> None:
    """A year of history (20,000 pairs, 365 days, 52 weeks, 500 profile items) whose lexicon
    fingerprint is stale: the first start is the one after an upgrade that changed the
    lexicon, every stored text labelled again before READY (cache/relabel.py); the next ones
    start on the DB as it is every other day."""
    db = open_state_db(path, MIGRATIONS)
    fill(db)
    db.execute("UPDATE device_state SET value = '\"before\"' WHERE key = ?", [FINGERPRINT_KEY])
    db.close()


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def print_starts(starts: list[float], upgrade: float, floor: list[float]) -> None:
    starts = sorted(starts)
    print(
        f"  cold start to READY=1           {starts[len(starts) // 2]:8.0f} ms"
        f"  (median of {len(starts)}, min {starts[0]:.0f}; process start included)"
    )
    print(
        f"    the floor's start             {median(floor):8.0f} ms  (median of {len(floor)},"
        f" min {min(floor):.0f}; ours/floor {median(starts) / median(floor):.2f}×, goal ≤ 2×)"
    )
    print(
        f"    first start after an upgrade  {upgrade:8.0f} ms  (the lexicon changed: every"
        " stored text is labelled again before READY)"
    )


def timed_start(runtime: RuntimeProcess) -> float:
    """Start it; ms to READY=1, the process start included."""
    t0 = time.monotonic()
    runtime.start(timeout_s=60)
    return (time.monotonic() - t0) * 1000


def report(title: str, took: list[float], metrics: dict[str, float], cpu: float) -> None:
    device = "a2a_turn_device_seconds"
    count = metrics[f"{device}_count"]
    p50, p99 = (quantile(metrics, device, q) * 1000 for q in (0.5, 0.99))
    print(f"  {title}")
    print(
        f"    round trip at the probe   p50 {pct(took, 0.5):6.2f} ms  p99 {pct(took, 0.99):6.2f} ms"
    )
    print(
        f"    on the device             p50 {p50:6.2f} ms  p99 {p99:6.2f} ms"
        f"  ({count:.0f} answered; all but the cloud's own time)"
    )
    print(f"    runtime CPU               {cpu * 1000 / len(took):6.2f} ms a turn (user + system)")
    phase = "a2a_turn_phase_seconds"
    for name in (*PHASES, "cloud"):
        mean = metrics[f'{phase}_sum{{phase="{name}"}}'] / count * 1000
        p99 = quantile(metrics, phase, 0.99, f'phase="{name}",') * 1000
        note = "  (HTTP to the sim cloud and its planning)" if name == "cloud" else ""
        print(f"      {name:<10} mean {mean:6.3f} ms  p99 {p99:6.3f} ms{note}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--gap-ms", type=float, default=30, help="pause after each paced turn")
    parser.add_argument(
        "--python",
        default=None,
        help="run the runtime with this interpreter, as its venv installed the package (a venv"
        " with `pip install .` only, as on a robot: its byte code compiled; bench/run_all.sh"
        " installs the tree's code first); without it, this venv runs this tree",
    )
    parser.add_argument("--starts", type=int, default=5, help="cold starts measured")
    args = parser.parse_args()
    metrics_port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        year_old_db(work / "state" / "state.db")
        broker, cloud, runtime = runtime_stack(work, metrics_port, args.python)
        probe = MqttProbe(broker.port, [f"{ROOT}/turn/response"], root=ROOT)
        agents = instant_agents(broker.port, ROOT, "mobility.move_to_room", "air_purifier.start")
        floor = ImportFloor(work / "floor" / "state.db", broker.port, cloud.url, args.python)
        try:
            upgrade = timed_start(runtime)
            runtime.terminate()  # the floor opens a copy of the DB as every day's start finds it
            copy_db(work / "state" / "state.db", work / "floor" / "state.db")
            starts, floor_starts = [], []
            for n in range(max(1, args.starts)):
                if n:
                    runtime.terminate()
                floor_starts.append(floor.start())
                floor.stop()
                starts.append(timed_start(runtime))
            floor.start()  # idle beside ours from here on: its RSS is read with ours
            time.sleep(0.5)
            size_before = (work / "state" / "state.db").stat().st_size
            cpu0 = cpu_s(runtime)
            paced = turns(probe, args.turns, args.gap_ms / 1000, "p")
            paced_cpu = cpu_s(runtime) - cpu0
            paced_metrics = scrape(metrics_port)
            runtime.terminate()  # a fresh process: its summaries hold the next pass only
            runtime.start()
            time.sleep(0.5)
            cpu0 = cpu_s(runtime)
            loaded = turns(probe, args.turns, 0.0, "l")
            loaded_cpu = cpu_s(runtime) - cpu0
            assert runtime.proc is not None
            time.sleep(2)
            loaded_metrics = scrape(metrics_port)
            rss, cpu0 = proc_stat(runtime.proc.pid)
            floor_rss = floor.rss_kb()
            time.sleep(10)
            _, cpu1 = proc_stat(runtime.proc.pid)
            growth = ((work / "state" / "state.db").stat().st_size - size_before) / 1024
        finally:
            stop_all(agents, probe, runtime, floor, cloud, broker)
    print("runtime on a year-old cache (sim cloud answering at once, loopback Mosquitto)")
    print_starts(starts, upgrade, floor_starts)
    print("  turns: half chit-chat, half starting a two-step workflow that instant agents run")
    report(
        f"{args.turns} turns, {args.gap_ms:g} ms after each answer (the turn's own work)",
        paced,
        paced_metrics,
        paced_cpu,
    )
    report(
        f"{args.turns} turns back to back (replay and the last workflow's callbacks compete)",
        loaded,
        loaded_metrics,
        loaded_cpu,
    )
    print(
        f"  steady RSS                      {rss / 1024:8.1f} MB"
        f"  ({'runtime-only venv' if args.python else 'dev venv'})"
    )
    print(
        f"    the import floor              {floor_rss / 1024:8.1f} MB  (same interpreter; ours"
        f" − floor {(rss - floor_rss) / 1024:+.1f} MB, goal ≤ +15 MB)"
    )
    print(f"  CPU while idle                  {100 * (cpu1 - cpu0) / 10:8.2f} % of a core")
    print(f"  DB growth per 1,000 turns       {growth * 1000 / (2 * args.turns):8.0f} kB")
    device = "a2a_turn_device_seconds"
    record("runtime", "cold_start_ms", round(median(starts)))
    record("runtime", "floor_start_ms", round(median(floor_starts)))
    record("runtime", "start_over_floor", round(median(starts) / median(floor_starts), 2))
    record("runtime", "first_start_after_upgrade_ms", round(upgrade))
    record("runtime", "device_p99_ms", round(quantile(paced_metrics, device, 0.99) * 1000, 2))
    record(
        "runtime", "loaded_device_p99_ms", round(quantile(loaded_metrics, device, 0.99) * 1000, 2)
    )
    record("runtime", "steady_rss_mb", round(rss / 1024, 1))
    record("runtime", "floor_rss_mb", round(floor_rss / 1024, 1))
    record("runtime", "rss_over_floor_mb", round((rss - floor_rss) / 1024, 1))
    record("runtime", "rss_venv", "runtime-only" if args.python else "dev")


if __name__ == "__main__":
    main()
