"""Durable single-step jobs side by side, same machine, same run, same count:

- ours: single-step workflows pushed on `P/workflow/request` to the real runtime process through
  a real Mosquitto, run by an instant device agent (command -> RUNNING and COMPLETED callbacks
  -> WORKFLOW_COMPLETED), every change committed with `synchronous=FULL` before it is
  acknowledged or sent, every event reported to the sim cloud;
- huey + paho, the peer of issue 23 (how a Python team would build this without us,
  `bench.huey_peer`): huey's consumer in a process of its own runs one `SqliteHuey(fsync=True)`
  task per step that publishes the step's command (our topic, our payload, QoS 1) through one
  shared paho client to the same instant device agents (`benchlib.instant_agents`, on a robot
  root of its own so that our idle runtime never sees its callbacks) and waits for their
  COMPLETED callback (correlated by `task_id`); huey stores the result, the producer reads it
  back. Its durability is the same as ours (queue, start and result each committed with
  `synchronous=FULL`; QoS 1).
  Run with 1, 2, 4 and 8 thread workers; the best is the one compared (each count is printed);
- huey alone, local only (no MQTT, no agent): enqueue → a thread worker executes → result read;
- persist-queue `SQLiteAckQueue`, local only: put → get → ack.

Ours and huey + paho (each worker count) take turns in `--rounds` bursts of `--jobs`/`--rounds`
jobs, so drift on a shared machine falls on all of them; a burst is timed from its first
enqueue (ours: the first `workflow/request`) to its last result, after a warm-up job. The
local-only ones run one burst of `--jobs` afterwards. Prints jobs/s and the ratios
"ours / this". Asserts nothing.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python -m bench.peers [--jobs 1200] [--rounds 3] [--workers 1,2,4,8]
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

ROOT = "a2a/robot-bench"
HUEY_ROOT = "a2a/robot-huey"  # its own robot: our runtime must not see (and refuse) its callbacks


# the job's operation: one that holds no resource, as huey's jobs hold none (like for like);
# `--operation speaker.say` holds the voice (one at a time, SPEC 4.3): huey then runs with one
# worker too, the only count that keeps that promise
FREE_OP = "display.clear"
ARGS = {"speaker.say": {"text": "안녕하세요"}}


def one_step(n: int, operation: str = FREE_OP) -> dict[str, Any]:
    capability, _, op = operation.partition(".")
    return {
        "workflow_id": f"job-{n:05d}",
        "plan_id": "bench",
        "steps": [
            {
                "step_id": "job",
                "capability_id": capability,
                "operation_id": op,
                "args": ARGS.get(operation, {}),
            }
        ],
    }


def warm_up(probe: MqttProbe, operation: str) -> None:
    """One job through our runtime before the timing, as each huey consumer gets one; asked
    again while the runtime's subscriptions may not be in place (a request before them is
    not kept: no session yet)."""
    for attempt in range(10):
        try:
            ours_block(probe, 90_000 + attempt, 1, operation, timeout_s=3)
            return
        except TimeoutError:
            continue
    raise TimeoutError("our runtime never ran the warm-up job")


def ours_block(
    probe: MqttProbe, first: int, count: int, operation: str, timeout_s: float = 300
) -> float:
    """`count` single-step jobs to our runtime in one burst; seconds until all completed."""
    pending = {f"job-{n:05d}" for n in range(first, first + count)}

    def all_done(body: dict[str, Any]) -> bool:
        if body.get("status") == "WORKFLOW_COMPLETED":
            pending.discard(str(body.get("workflow_id")))
        return not pending

    t0 = time.monotonic()
    for n in range(first, first + count):
        probe.publish(f"{ROOT}/workflow/request", one_step(n, operation))
    probe.wait_for(f"{ROOT}/workflow/event", all_done, timeout_s=timeout_s)
    return time.monotonic() - t0


def huey_paho_block(
    first: int, count: int, workers: int, broker: Mosquitto, work: Path, operation: str
) -> float:
    """huey + paho with `workers` thread workers, its consumer started for this block: a
    warm-up job (the consumer's start is not timed), then `count` jobs enqueued at once, every
    result read back; seconds from the first enqueue to the last result."""
    db = str(work / f"huey-paho-{workers}.db")
    argv = [sys.executable, "-m", "bench.huey_peer", "--db", db, "--port", str(broker.port)]
    consumer = subprocess.Popen([*argv, "--root", HUEY_ROOT, "--workers", str(workers)])
    _huey, task = job_task(db)
    step = one_step(0, operation)["steps"][0]
    try:
        warm = task(step, f"hp{workers}-warm{first}")
        warm.get(blocking=True, timeout=60, max_delay=0.005)
        t0 = time.monotonic()
        results = [task(step, f"hp{workers}-{n:05d}") for n in range(first, first + count)]
        for result in results:
            got = result.get(blocking=True, timeout=120, max_delay=0.005)
            assert got["status"] == "COMPLETED", got
        return time.monotonic() - t0
    finally:
        consumer.send_signal(signal.SIGTERM)
        consumer.wait(30)


def interleaved(
    jobs: int, rounds: int, workers: list[int], work: Path, operation: str = FREE_OP
) -> tuple[float, dict[int, float]]:
    """Ours and huey + paho at each worker count, `rounds` blocks each, taking turns (drift on
    a shared machine falls on all of them); jobs/s over all blocks."""
    broker, cloud, runtime = runtime_stack(work)
    agents = [instant_agents(broker.port, root, operation) for root in (ROOT, HUEY_ROOT)]
    probe = MqttProbe(broker.port, [f"{ROOT}/workflow/event"])
    per = jobs // rounds
    spent = {0: 0.0, **{n: 0.0 for n in workers}}  # 0: ours
    try:
        runtime.start()
        warm_up(probe, operation)
        for r in range(rounds):
            spent[0] += ours_block(probe, r * per, per, operation)
            for n in workers:
                spent[n] += huey_paho_block(r * per, per, n, broker, work, operation)
    finally:
        stop_all(probe, *agents, runtime, cloud, broker)
    rates = {n: per * rounds / seconds for n, seconds in spent.items()}
    return rates.pop(0), rates


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
    parser.add_argument("--jobs", type=int, default=1200)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved blocks per contender")
    parser.add_argument("--workers", default="1,2,4,8", help="huey + paho worker counts to try")
    parser.add_argument(
        "--voice-jobs", type=int, default=300, help="speaker.say jobs vs huey at 1 worker (0: none)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        workers = [int(w) for w in args.workers.split(",")]
        ours_rate, by_workers = interleaved(args.jobs, args.rounds, workers, work)
        if args.voice_jobs:  # a resource held: one job at a time on both sides
            (work / "voice").mkdir()
            voice, huey_one = interleaved(args.voice_jobs, 1, [1], work / "voice", "speaker.say")
            one = huey_one[1]
            print(
                f"  speaker.say (the voice, one at a time): ours {voice:.1f} jobs/s, huey + paho"
                f" at 1 worker {one:.1f} jobs/s, ours / huey {voice / one:.2f}"
            )
            record("peers", "voice_ours_jobs_s", round(voice, 1))
            record("peers", "voice_huey_paho_1_jobs_s", round(huey_one[1], 1))
        best = max(by_workers, key=lambda n: by_workers[n])
        rates = {
            f"a2a-edge workflows of {FREE_OP} (MQTT round trip, 2 callbacks)": ours_rate,
            f"huey + paho, {best} thread workers (the best of {len(by_workers)})": by_workers[best],
            "huey SqliteHuey(fsync=True) alone, local, 2 thread workers": huey_rate(
                args.jobs, work
            ),  # the local ones: one burst of --jobs after the others
            "persist-queue SQLiteAckQueue put/get/ack, local": persist_queue_rate(args.jobs, work),
        }
    print(
        f"durable single-step jobs: {args.rounds} interleaved bursts of {args.jobs // args.rounds}"
        " per contender"
    )
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
