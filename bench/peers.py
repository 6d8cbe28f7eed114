"""Durable single-step jobs side by side, same machine, same run, same count:

- ours: single-step workflows pushed on `P/workflow/request` to the real runtime process through
  a real Mosquitto, run by an instant device agent (command -> RUNNING and COMPLETED callbacks
  -> WORKFLOW_COMPLETED), every change committed with `synchronous=FULL` before it is
  acknowledged or sent, every event reported to the sim cloud;
- huey `SqliteHuey(fsync=True)`: enqueue → a thread worker executes → result read back;
- persist-queue `SQLiteAckQueue`: put → get → ack.

Prints jobs/s and the ratios. Asserts nothing.

    .venv/bin/pip install -e '.[bench]' && .venv/bin/python -m bench.peers [--jobs 1000]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import persistqueue
from huey import SqliteHuey

from bench.benchlib import instant_agents, runtime_stack, stop_all
from sim.probe import MqttProbe

ROOT = "a2a/robot-bench"


def one_step(n: int) -> dict[str, Any]:
    return {
        "workflow_id": f"job-{n:05d}",
        "plan_id": "bench",
        "steps": [
            {
                "step_id": "say",
                "capability_id": "speaker",
                "operation_id": "say",
                "args": {"text": "안녕하세요"},
            }
        ],
    }


def jobs(probe: MqttProbe, count: int) -> None:
    """`count` single-step jobs in one burst; returns when the last one completed."""
    for n in range(count):
        probe.publish(f"{ROOT}/workflow/request", one_step(n))
    last = f"job-{count - 1:05d}"
    probe.wait_for(
        f"{ROOT}/workflow/event",
        lambda b: b.get("workflow_id") == last and b.get("status") == "WORKFLOW_COMPLETED",
        timeout_s=600,
    )


def ours(count: int, work: Path) -> float:
    broker, cloud, runtime = runtime_stack(work)
    agents = instant_agents(broker.port, ROOT, "speaker.say")
    probe = MqttProbe(broker.port, [f"{ROOT}/workflow/event"])
    try:
        runtime.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        jobs(probe, count)
        elapsed = time.monotonic() - t0
        done = sum(
            1
            for b in probe.messages(f"{ROOT}/workflow/event")
            if b.get("status") == "WORKFLOW_COMPLETED"
        )
        assert done == count, f"{done} of {count} workflows completed"
        return count / elapsed
    finally:
        stop_all(probe, agents, runtime, cloud, broker)


def huey_rate(count: int, work: Path) -> float:
    logging.getLogger("huey").setLevel(logging.WARNING)
    huey = SqliteHuey(filename=str(work / "huey.db"), fsync=True)

    @huey.task()
    def job(n: int) -> int:
        return n

    consumer = huey.create_consumer(
        workers=2, worker_type="thread", periodic=False, initial_delay=0.001, max_delay=0.01
    )
    consumer.start()
    try:
        t0 = time.monotonic()
        results = [job(n) for n in range(count)]
        for n, result in enumerate(results):
            assert result.get(blocking=True, timeout=60, max_delay=0.005) == n
        return count / (time.monotonic() - t0)
    finally:
        consumer.stop(graceful=True)


def persist_queue_rate(count: int, work: Path) -> float:
    queue = persistqueue.SQLiteAckQueue(str(work / "pq"), auto_commit=True)
    t0 = time.monotonic()
    for n in range(count):
        queue.put(one_step(n))
    for _ in range(count):
        queue.ack(queue.get())
    return count / (time.monotonic() - t0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rates = {
            "a2a-edge workflows (MQTT round trip, 2 callbacks each)": ours(args.jobs, work),
            "huey SqliteHuey(fsync=True), 2 thread workers": huey_rate(args.jobs, work),
            "persist-queue SQLiteAckQueue put/get/ack": persist_queue_rate(args.jobs, work),
        }
    print(f"{args.jobs} durable single-step jobs, one after another in one burst")
    ours_rate = next(iter(rates.values()))
    for name, rate in rates.items():
        print(f"  {name:<56} {rate:9.1f} jobs/s   ours / this {ours_rate / rate:6.2f}")


if __name__ == "__main__":
    main()
