"""The TaskManager through the real runtime process and a real Mosquitto on loopback, with
instant device agents (RUNNING and COMPLETED callbacks at once):

1. unloaded: one two-step workflow at a time; step COMPLETED -> dependant command at the agent;
2. sustained: `--active` two-step workflows kept in flight (a new one as each completes, on
   two pairs of resources) for `--seconds`: callbacks/s taken in, the same latency, and the
   runtime's own share of each callback (arrival to committed and the next command handed to
   the broker, from its /metrics);
3. burst: `--workflows` two-step workflows at once: workflows/s and the latency behind a queue.

Prints figures; asserts nothing.

    .venv/bin/python -m bench.taskmanager [--active 4] [--seconds 20] [--workflows 2000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho

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
from sim.broker import free_port
from sim.devices import DeviceAgents
from sim.mqttc import start_client
from sim.probe import MqttProbe

ROOT = "a2a/robot-bench"
EVENTS = f"{ROOT}/workflow/event"
SHAPES = (
    (("move", "mobility", "move_to_room", {"room": "안방"}), ("purify", "air_purifier", "start")),
    (("say", "speaker", "say", {"text": "안녕"}), ("show", "display", "show_content")),
)
OPERATIONS = ("mobility.move_to_room", "air_purifier.start", "speaker.say", "display.show_content")


def two_step(n: int, shape: int = 0) -> dict[str, Any]:
    (first, cap1, op1, args1), (second, cap2, op2) = SHAPES[shape]
    return {
        "workflow_id": f"wf-{n:05d}",
        "plan_id": "bench",
        "steps": [
            {"step_id": first, "capability_id": cap1, "operation_id": op1, "args": args1},
            {
                "step_id": second,
                "capability_id": cap2,
                "operation_id": op2,
                "args": {},
                "depends_on": [first],
            },
        ],
    }


def gap_ms(agents: DeviceAgents, n: int, shape: int = 0) -> float:
    """Step COMPLETED published by the agent -> the dependant command received by it."""
    (first, *_), (second, *_) = SHAPES[shape]
    wf = f"wf-{n:05d}"
    return (agents.received_at[f"{wf}:{second}"] - agents.completed_at[f"{wf}:{first}"]) * 1000


class ClosedLoop:
    """Keeps `active` workflows in flight: each WORKFLOW_COMPLETED submits the next one."""

    def __init__(self, port: int, active: int) -> None:
        self.active = active
        self.submitted = 0
        self.completed: list[int] = []
        self.running = True
        self._lock = threading.Lock()
        self._client = start_client("127.0.0.1", port, "bench-loop", self._on_connect, self._on_msg)
        self._ready = threading.Event()
        if not self._ready.wait(10):
            raise TimeoutError("closed loop could not connect")

    def _on_connect(self, client: paho.Client, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
        client.subscribe(EVENTS, qos=1)
        self._ready.set()

    def _on_msg(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        body = json.loads(msg.payload)
        if body.get("status") != "WORKFLOW_COMPLETED":
            return
        with self._lock:
            self.completed.append(int(str(body["workflow_id"])[3:]))
            if self.running:
                self._submit()

    def _submit(self) -> None:
        n = self.submitted
        self.submitted += 1
        body = json.dumps(two_step(n, n % 2), ensure_ascii=False)
        self._client.publish(f"{ROOT}/workflow/request", body, qos=1)

    def start(self) -> None:
        with self._lock:
            for _ in range(self.active):
                self._submit()

    def stop(self) -> list[int]:
        with self._lock:
            self.running = False
            done = list(self.completed)
        self._client.disconnect()
        self._client.loop_stop()
        return done


def callbacks_taken(metrics: dict[str, float]) -> float:
    return sum(v for k, v in metrics.items() if k.startswith("a2a_callbacks_total"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--one-by-one", type=int, default=1000)
    parser.add_argument("--active", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workflows", type=int, default=2000)
    args = parser.parse_args()
    metrics_port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        broker, cloud, runtime = runtime_stack(Path(tmp), metrics_port)
        agents = instant_agents(broker.port, ROOT, *OPERATIONS)
        probe = MqttProbe(broker.port, [EVENTS])
        try:
            runtime.start()
            time.sleep(0.5)
            base = 0
            for n in range(base, base + args.one_by_one):
                probe.publish(f"{ROOT}/workflow/request", two_step(n))
                probe.wait_for(
                    EVENTS,
                    lambda b, w=f"wf-{n:05d}": (
                        b.get("workflow_id") == w and b.get("status") == "WORKFLOW_COMPLETED"
                    ),
                    timeout_s=60,
                )
            unloaded = [gap_ms(agents, n) for n in range(base, base + args.one_by_one)]
            unloaded_metrics = scrape(metrics_port)
            probe.close()

            runtime.terminate()  # a fresh process: its summaries hold the sustained run only
            runtime.start()
            time.sleep(0.5)
            loop = ClosedLoop(broker.port, args.active)
            loop.submitted = base = 10_000
            before = callbacks_taken(scrape(metrics_port))
            assert runtime.proc is not None
            cpu0 = proc_stat(runtime.proc.pid)[1]
            t0 = time.monotonic()
            loop.start()
            time.sleep(args.seconds)
            done = loop.stop()
            elapsed = time.monotonic() - t0
            cpu = proc_stat(runtime.proc.pid)[1] - cpu0
            time.sleep(0.5)
            metrics = scrape(metrics_port)
            taken = callbacks_taken(metrics) - before
            rate = taken / elapsed
            sustained = [gap_ms(agents, n, n % 2) for n in done]

            probe = MqttProbe(broker.port, [EVENTS])
            base = 20_000
            cpu0 = proc_stat(runtime.proc.pid)[1]
            t0 = time.monotonic()
            for n in range(base, base + args.workflows):
                probe.publish(f"{ROOT}/workflow/request", two_step(n))
            last = f"wf-{base + args.workflows - 1:05d}"
            probe.wait_for(
                EVENTS,
                lambda b: b.get("workflow_id") == last and b.get("status") == "WORKFLOW_COMPLETED",
                timeout_s=600,
            )
            burst_rate = args.workflows / (time.monotonic() - t0)
            burst_cpu = proc_stat(runtime.proc.pid)[1] - cpu0
            burst = [gap_ms(agents, n) for n in range(base, base + args.workflows)]
        finally:
            stop_all(probe, agents, runtime, cloud, broker)
    batch = metrics["a2a_inbound_batch_messages_sum"] / metrics["a2a_inbound_batch_messages_count"]

    def line(name: str, values: list[float]) -> None:
        print(f"  {name:<44} p50 {pct(values, 0.5):6.2f} ms  p99 {pct(values, 0.99):6.2f} ms")

    def own(metrics: dict[str, float]) -> None:
        name = "a2a_callback_device_seconds"
        p50, p99 = (quantile(metrics, name, q) * 1000 for q in (0.5, 0.99))
        print(
            f"  {'on the device (arrival -> next command out)':<44} p50 {p50:6.2f} ms  "
            f"p99 {p99:6.2f} ms"
        )

    print("TaskManager through Mosquitto on loopback, instant device agents")
    print(f"{args.one_by_one} two-step workflows one at a time")
    line("step COMPLETED -> dependant command", unloaded)
    own(unloaded_metrics)
    print(
        f"{args.active} two-step workflows kept in flight for {args.seconds:g} s "
        f"({len(done)} completed)"
    )
    print(f"  callbacks taken in                           {rate:8.1f} /s")
    line("step COMPLETED -> dependant command", sustained)
    own(metrics)
    print(f"  inbound messages per group commit (mean)     {batch:8.2f}")
    print(f"  runtime CPU per callback (/proc, all threads) {1000 * cpu / max(taken, 1):7.2f} ms")
    print(f"{args.workflows} two-step workflows in one burst")
    print(f"  completed workflows                          {burst_rate:8.1f} /s")
    line("step COMPLETED -> dependant command", burst)
    per_workflow = 1000 * burst_cpu / args.workflows
    print(f"  runtime CPU per workflow (/proc, all threads) {per_workflow:7.2f} ms")
    record("taskmanager", "completed_to_command_p99_ms", round(pct(unloaded, 0.99), 2))
    device_p99 = quantile(unloaded_metrics, "a2a_callback_device_seconds", 0.99) * 1000
    record("taskmanager", "device_p99_ms", round(device_p99, 2))
    record("taskmanager", "callbacks_s", round(rate, 1))
    record("taskmanager", "burst_workflows_s", round(burst_rate, 1))
    record("taskmanager", "cpu_ms_per_callback", round(1000 * cpu / max(taken, 1), 2))


if __name__ == "__main__":
    main()
