"""Agents come and go (issue 32, SPEC §4.8): how soon the runtime knows.

1. An agent's death to its step's end: a mobility agent (a2a_agent, its own process) takes a
   move (`timeout_s` 120) and is SIGKILLed while it is RUNNING; the time from the kill to the
   step's FAILED `agent_lost` on `P/workflow/event`, over `--kills` kills (p50, p99, max).
2. The robot's restart to every in-flight task settled: one agent process serving mobility,
   air_purifier and display holds a move, a purifier start and a shown content; the runtime and
   the agent are SIGKILLed together (a power cut); the agent starts again (a new boot, it now
   completes what it is sent), then the runtime; the time from the runtime's start to the last
   of the three workflows ending (the move failed `agent_restarted`, the other two re-sent and
   completed), and the same less the runtime's own start (to READY).

    .venv/bin/python -m bench.presence [--kills 30]

Asserts nothing; prints the figures and records them (bench/benchlib.py `record`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.benchlib import pct, record, runtime_stack, stop_all
from sim.probe import MqttProbe

ROOT = "a2a/robot-bench"
AGENT = Path(__file__).parents[1] / "tests" / "e2e" / "presence_agent.py"
EVENTS = f"{ROOT}/workflow/event"


class Agent:
    def __init__(self, port: int, caps: str, mode: str = "hold") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(AGENT), str(port), ROOT, caps, mode],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(20):
            raise TimeoutError("agent did not start")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())
            if line.startswith("serving "):
                self.boot_id = line.split()[1]
                self.ready.set()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def step(workflow_id: str, cap: str, op: str, **args: Any) -> dict[str, Any]:
    return {
        "workflow_id": workflow_id,
        "steps": [
            {
                "step_id": "s",
                "capability_id": cap,
                "operation_id": op,
                "args": args,
                "timeout_s": 120,
            }
        ],
    }


def event(probe: MqttProbe, workflow_id: str, status: str, timeout_s: float = 20) -> Any:
    return probe.wait_for(
        EVENTS, lambda b: b["workflow_id"] == workflow_id and b["status"] == status, timeout_s
    )


def online(probe: MqttProbe, cap: str, boot_id: str) -> None:
    probe.wait_for(
        f"{ROOT}/agent/{cap}/status",
        lambda b: b.get("state") == "online" and b.get("boot_id") == boot_id,
    )


def deaths(port: int, probe: MqttProbe, kills: int) -> list[float]:
    took = []
    for n in range(kills):
        agent = Agent(port, "mobility")
        online(probe, "mobility", agent.boot_id)
        workflow_id = f"wf-kill-{n}"
        probe.publish(
            f"{ROOT}/workflow/request", step(workflow_id, "mobility", "move_to_room", room="안방")
        )
        event(probe, workflow_id, "RUNNING")
        killed = time.monotonic()
        agent.kill()
        ended = probe.wait_for(
            EVENTS,
            lambda b, w=workflow_id: b["workflow_id"] == w and b["status"] == "FAILED",
            20,
        )
        took.append(time.monotonic() - killed)
        assert ended["reason"] == "agent_lost", ended
    return took


def power_cut(port: int, probe: MqttProbe, runtime: Any) -> tuple[float, float]:
    agent = Agent(port, "mobility,air_purifier,display")
    for cap in ("mobility", "air_purifier", "display"):
        online(probe, cap, agent.boot_id)
    flows = {
        "wf-cut-move": step("wf-cut-move", "mobility", "move_to_room", room="안방"),
        "wf-cut-purify": step("wf-cut-purify", "air_purifier", "start", mode="auto"),
        "wf-cut-show": step("wf-cut-show", "display", "show_content"),
    }
    for workflow_id, body in flows.items():
        probe.publish(f"{ROOT}/workflow/request", body)
        event(probe, workflow_id, "RUNNING")
    runtime.kill()
    agent.kill()
    again = Agent(port, "mobility,air_purifier,display", "complete")
    online(probe, "display", again.boot_id)
    started = time.monotonic()
    runtime.start(wait_ready=True)
    ready = time.monotonic()
    for workflow_id in flows:
        probe.wait_for(
            EVENTS,
            lambda b, w=workflow_id: (
                b["workflow_id"] == w and b["status"] in ("WORKFLOW_FAILED", "WORKFLOW_COMPLETED")
            ),
            30,
        )
    settled = time.monotonic()
    again.kill()
    return settled - started, settled - ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kills", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="a2a-bench-presence-") as tmp:
        broker, cloud, runtime = runtime_stack(Path(tmp))
        runtime.start(wait_ready=True)
        probe = MqttProbe(broker.port, [f"{ROOT}/#"], root=ROOT)
        try:
            took = deaths(broker.port, probe, args.kills)
            total, after_ready = power_cut(broker.port, probe, runtime)
        finally:
            probe.close()
            stop_all(runtime, cloud, broker)
    p50, p99 = pct(took, 0.5) * 1000, pct(took, 0.99) * 1000
    print(
        f"agent death -> step FAILED agent_lost over {len(took)} kills: p50 {p50:.0f} ms,"
        f" p99 {p99:.0f} ms, max {max(took) * 1000:.0f} ms"
    )
    print(
        f"robot restart -> 3 in-flight tasks settled: {total:.2f} s from the runtime's start,"
        f" {after_ready:.2f} s after READY"
    )
    record("presence", "death_to_step_end_p50_ms", round(p50))
    record("presence", "death_to_step_end_p99_ms", round(p99))
    record("presence", "restart_to_settled_s", round(total, 2))
    record("presence", "ready_to_settled_s", round(after_ready, 2))


if __name__ == "__main__":
    main()
