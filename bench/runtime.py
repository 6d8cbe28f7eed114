"""The runtime as its users feel it, on a year-old cache: cold start to READY, turn round trip
through Mosquitto with the sim cloud answering at once (p50/p99 over N turns), steady RSS, CPU
while idle, DB growth per 1,000 turns. Prints figures; asserts nothing.

    .venv/bin/python -m bench.runtime [--turns 1000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from a2a_common.sqlite import open_state_db
from bench.benchlib import pct, proc_stat, runtime_stack
from bench.snapshot import fill
from edge.schema import MIGRATIONS
from sim.probe import MqttProbe

ROOT = "a2a/robot-bench"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        db = open_state_db(work / "state" / "state.db", MIGRATIONS)
        fill(db)  # a year of history: 20,000 pairs, 365 days, 52 weeks, 500 profile items
        db.close()
        broker, cloud, runtime = runtime_stack(work)
        probe = MqttProbe(broker.port, [f"{ROOT}/turn/response"])
        try:
            t0 = time.monotonic()
            runtime.start()
            ready_ms = (time.monotonic() - t0) * 1000
            time.sleep(0.5)
            size_before = (work / "state" / "state.db").stat().st_size
            took = []
            for n in range(args.turns):
                start = time.perf_counter()
                probe.publish(
                    f"{ROOT}/turn/request",
                    {"turn_id": f"b{n}", "recognized_text": "오늘 날씨 어때?"},
                )
                probe.wait_for(
                    f"{ROOT}/turn/response",
                    lambda b, t=f"b{n}": b.get("turn_id") == t,
                    timeout_s=10,
                )
                took.append((time.perf_counter() - start) * 1000)
            assert runtime.proc is not None
            time.sleep(2)
            rss, cpu0 = proc_stat(runtime.proc.pid)
            time.sleep(10)
            _, cpu1 = proc_stat(runtime.proc.pid)
            growth = ((work / "state" / "state.db").stat().st_size - size_before) / 1024
        finally:
            probe.close()
            runtime.close()
            cloud.stop()
            broker.stop()
    print("runtime on a year-old cache (sim cloud answering at once, loopback Mosquitto)")
    print(f"  cold start to READY=1           {ready_ms:8.0f} ms (process start included)")
    print(
        f"  turn round trip ({args.turns} turns)   p50 {pct(took, 0.5):.2f} ms  "
        f"p99 {pct(took, 0.99):.2f} ms"
    )
    print(f"  steady RSS                      {rss / 1024:8.1f} MB")
    print(f"  CPU while idle                  {100 * (cpu1 - cpu0) / 10:8.2f} % of a core")
    print(f"  DB growth per 1,000 turns       {growth * 1000 / args.turns:8.0f} kB")


if __name__ == "__main__":
    main()
