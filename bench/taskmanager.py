"""Durable workflow throughput through a real Mosquitto and the real runtime process, with an
instant device agent; and, side by side, persist-queue's SQLiteAckQueue put → get → ack for the
same number of items. Prints figures; asserts nothing.

    .venv/bin/pip install -e '.[bench]' && .venv/bin/python -m bench.taskmanager [--workflows 2000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import persistqueue

from bench.benchlib import pct, runtime_stack
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe

ROOT = "a2a/robot-bench"


def two_step(n: int) -> dict[str, object]:
    return {
        "workflow_id": f"wf-{n:05d}",
        "plan_id": "bench",
        "steps": [
            {
                "step_id": "move",
                "capability_id": "mobility",
                "operation_id": "move_to_room",
                "args": {"room": "안방"},
            },
            {
                "step_id": "purify",
                "capability_id": "air_purifier",
                "operation_id": "start",
                "args": {"mode": "auto"},
                "depends_on": ["move"],
            },
        ],
    }


def ours(count: int, work: Path, one_by_one: int) -> tuple[float, list[float], list[float]]:
    broker, cloud, runtime = runtime_stack(work)
    agents = DeviceAgents(
        broker.port,
        ROOT,
        behaviors={
            "mobility.move_to_room": Behavior("instant"),
            "air_purifier.start": Behavior("instant"),
        },
    )
    probe = MqttProbe(broker.port, [f"{ROOT}/workflow/event"])
    try:
        runtime.start()
        time.sleep(0.5)  # let the runtime subscribe before the burst
        for n in range(count, count + one_by_one):  # unloaded: one workflow at a time
            probe.publish(f"{ROOT}/workflow/request", two_step(n))
            probe.wait_for(
                f"{ROOT}/workflow/event",
                lambda b, w=f"wf-{n:05d}": (
                    b.get("workflow_id") == w and b.get("status") == "WORKFLOW_COMPLETED"
                ),
                timeout_s=60,
            )
        unloaded = [
            (agents.received_at[f"wf-{n:05d}:purify"] - agents.completed_at[f"wf-{n:05d}:move"])
            * 1000
            for n in range(count, count + one_by_one)
        ]
        t0 = time.monotonic()
        for n in range(count):
            probe.publish(f"{ROOT}/workflow/request", two_step(n))
        last = f"wf-{count - 1:05d}"
        probe.wait_for(
            f"{ROOT}/workflow/event",
            lambda b: b.get("workflow_id") == last and b.get("status") == "WORKFLOW_COMPLETED",
            timeout_s=600,
        )
        elapsed = time.monotonic() - t0
        gaps = [
            (agents.received_at[f"wf-{n:05d}:purify"] - agents.completed_at[f"wf-{n:05d}:move"])
            * 1000
            for n in range(count)
        ]
        return count / elapsed, gaps, unloaded
    finally:
        probe.close()
        agents.close()
        runtime.close()
        cloud.stop()
        broker.stop()


def persist_queue_rate(count: int, work: Path) -> float:
    queue = persistqueue.SQLiteAckQueue(str(work / "pq"), auto_commit=True)
    t0 = time.monotonic()
    for n in range(count):
        queue.put(two_step(n))
    for _ in range(count):
        item = queue.get()
        queue.ack(item)
    return count / (time.monotonic() - t0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workflows", type=int, default=2000)
    parser.add_argument("--one-by-one", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rate, gaps, unloaded = ours(args.workflows, Path(tmp), args.one_by_one)
        peer = persist_queue_rate(args.workflows, Path(tmp))
    print(f"{args.one_by_one} two-step workflows one at a time (unloaded)")
    print(
        f"  step COMPLETED -> dependant command on the wire (ms): p50 {pct(unloaded, 0.5):.2f}  "
        f"p99 {pct(unloaded, 0.99):.2f}"
    )
    print(f"{args.workflows} two-step workflows in one burst through Mosquitto, instant agent")
    print(f"  completed workflows/s             {rate:10.1f}")
    print(
        f"  step COMPLETED -> dependant command on the wire (ms): p50 {pct(gaps, 0.5):.2f}  "
        f"p99 {pct(gaps, 0.99):.2f}  mean {statistics.fmean(gaps):.2f}"
    )
    print(f"persist-queue SQLiteAckQueue put->get->ack, {args.workflows} items")
    print(f"  items/s                           {peer:10.1f}")
    print(
        f"ratio ours (workflows/s, 2 commands + 4 callbacks each) / persist-queue (items/s): "
        f"{rate / peer:.3f}"
    )


if __name__ == "__main__":
    main()
