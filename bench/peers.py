"""Durable single-step jobs side by side, same machine, same run, same count:

- ours: single-step workflows pushed on `P/workflow/request` to the real runtime process through
  a real Mosquitto, run by an instant device agent (command -> RUNNING and COMPLETED callbacks
  -> WORKFLOW_COMPLETED), every change committed with `synchronous=FULL` before it is
  acknowledged or sent, every event reported to the sim cloud;
- huey + paho, the peer of issue 23 (how a Python team would build this without us,
  `bench.huey_peer`): huey's consumer in a process of its own runs one `SqliteHuey(fsync=True)`
  task per step that publishes the step's command (our topic, our payload, QoS 1) through one
  shared paho client to the SAME instant device agents and waits for their COMPLETED callback
  (correlated by `task_id`); huey stores the result, the producer reads it back. Its durability
  is the same as ours (queue, start and result each committed with `synchronous=FULL`; QoS 1).
  Run with 1, 2, 4 and 8 thread workers; the best is the one compared (each count is printed);
- huey alone, local only (no MQTT, no agent): enqueue → a thread worker executes → result read;
- persist-queue `SQLiteAckQueue`, local only: put → get → ack.

Every figure is a burst of `--jobs` jobs from the first enqueue (or publish) to the last result.
Prints jobs/s and the ratios "ours / this". Asserts nothing.

    .venv/bin/pip install -e '.[bench]' && .venv/bin/python -m bench.peers [--jobs 1000]
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import persistqueue
from huey import SqliteHuey

from bench.benchlib import instant_agents, record, runtime_stack, stop_all
from bench.huey_peer import job_task
from sim.broker import Mosquitto
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess

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


def ours(count: int, broker: Mosquitto, runtime: RuntimeProcess) -> float:
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
        stop_all(probe)
        runtime.terminate()  # its CPU is not the peer's to share


def huey_paho_rate(count: int, workers: int, broker: Mosquitto, work: Path) -> float:
    """huey + paho with `workers` thread workers: a warm-up job (the consumer's start is not
    timed), then `count` jobs enqueued at once, every result read back."""
    db = str(work / f"huey-paho-{workers}.db")
    argv = [sys.executable, "-m", "bench.huey_peer", "--db", db, "--port", str(broker.port)]
    consumer = subprocess.Popen([*argv, "--root", ROOT, "--workers", str(workers)])
    _huey, task = job_task(db)
    step = one_step(0)["steps"][0]
    try:
        task(step, f"hp{workers}-warm").get(blocking=True, timeout=60, max_delay=0.005)
        t0 = time.monotonic()
        results = [task(step, f"hp{workers}-{n:05d}") for n in range(count)]
        for result in results:
            got = result.get(blocking=True, timeout=120, max_delay=0.005)
            assert got["status"] == "COMPLETED", got
        return count / (time.monotonic() - t0)
    finally:
        consumer.send_signal(signal.SIGTERM)
        consumer.wait(30)


def _same(n: int) -> int:
    return n


def huey_rate(count: int, work: Path) -> float:
    logging.getLogger("huey").setLevel(logging.WARNING)
    huey = SqliteHuey(filename=str(work / "huey.db"), fsync=True)

    job = huey.task()(_same)

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
    parser.add_argument("--workers", default="1,2,4,8", help="huey + paho worker counts to try")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        broker, cloud, runtime = runtime_stack(work)
        agents = instant_agents(broker.port, ROOT, "speaker.say")
        try:
            ours_rate = ours(args.jobs, broker, runtime)
            by_workers = {
                n: huey_paho_rate(args.jobs, n, broker, work)
                for n in (int(w) for w in args.workers.split(","))
            }
        finally:
            stop_all(agents, runtime, cloud, broker)
        best = max(by_workers, key=lambda n: by_workers[n])
        rates = {
            "a2a-edge workflows (MQTT round trip, 2 callbacks each)": ours_rate,
            f"huey + paho, {best} thread workers (the best of {len(by_workers)})": by_workers[best],
            "huey SqliteHuey(fsync=True) alone, local, 2 thread workers": huey_rate(
                args.jobs, work
            ),
            "persist-queue SQLiteAckQueue put/get/ack, local": persist_queue_rate(args.jobs, work),
        }
    print(f"{args.jobs} durable single-step jobs, one after another in one burst")
    for name, rate in rates.items():
        print(f"  {name:<62} {rate:9.1f} jobs/s   ours / this {ours_rate / rate:6.2f}")
    tried = "  ".join(f"{n}: {rate:.1f}" for n, rate in by_workers.items())
    print(f"  huey + paho jobs/s by thread workers   {tried}")
    record("peers", "ours_jobs_s", round(ours_rate, 1))
    record("peers", "huey_paho_jobs_s", round(by_workers[best], 1))
    record("peers", "huey_paho_workers", best)
    record("peers", "huey_paho_by_workers", tried)
    record("peers", "ours_over_huey_paho", round(ours_rate / by_workers[best], 2))
    names = list(rates)
    record("peers", "huey_local_jobs_s", round(rates[names[2]], 1))
    record("peers", "persist_queue_jobs_s", round(rates[names[3]], 1))


if __name__ == "__main__":
    main()
