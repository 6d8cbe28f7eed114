"""A cancel as the body feels it (SPEC §4.2): PUI press → every `task/cancel` on the wire (three
dispatched tasks of one workflow, agents that confirm), and press → `safe_stop` on the wire
when the agent stays silent (a `hung` mobility agent; two confirmation windows). Measured at a
subscriber on the same Mosquitto. Prints figures; asserts nothing.

    .venv/bin/python -m bench.cancel [--runs 30] [--window 0.5]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.benchlib import pct, record, runtime_stack, stop_all
from sim.devices import Behavior, DeviceAgents
from sim.mqttc import start_client

ROOT = "a2a/robot-bench"
OPS = ("mobility.move_to_room", "speaker.say", "display.show_content")


def workflow(workflow_id: str) -> dict[str, Any]:
    steps = [
        {"step_id": op.replace(".", "_"), "capability_id": op.split(".")[0],
         "operation_id": op.split(".")[1], "args": {"room": "안방"} if "mobility" in op else {}}
        for op in OPS
    ]  # fmt: skip
    return {"workflow_id": workflow_id, "steps": steps}


Want = Callable[[str, Any], bool]


def running(task_id: str) -> Want:
    return lambda _topic, body: body.get("task_id") == task_id and body.get("status") == "RUNNING"


def cancel_of(workflow_id: str) -> Want:
    return lambda topic, body: "/task/cancel/" in topic and body.get("workflow_id") == workflow_id


def safe_stop_of(workflow_id: str) -> Want:
    return lambda _topic, body: (
        bool(body.get("safe_stop") is True) and (body.get("workflow_id") == workflow_id)
    )


class Wire:
    """Every message under the robot's root with its monotonic arrival."""

    def __init__(self, port: int) -> None:
        self.seen: list[tuple[float, str, Any]] = []
        self._cond = threading.Condition()
        self.client = start_client(
            "127.0.0.1", port, "", self._on_connect, self._on_message, "5", None, None
        )

    def _on_connect(self, client: Any, *_a: Any) -> None:
        client.subscribe(f"{ROOT}/#", qos=1)

    def _on_message(self, _c: Any, _u: Any, msg: Any) -> None:
        import json

        try:
            body = json.loads(msg.payload)
        except ValueError:
            return
        with self._cond:
            self.seen.append((time.monotonic(), msg.topic, body))
            self._cond.notify_all()

    def wait(self, want: Callable[[str, Any], bool], count: int, timeout_s: float = 20) -> float:
        """The arrival of the `count`-th matching message."""
        with self._cond:

            def hits() -> list[float]:
                return [t for t, topic, body in self.seen if want(topic, body)]

            assert self._cond.wait_for(lambda: len(hits()) >= count, timeout_s)
            return hits()[count - 1]

    def forget(self) -> None:
        """Drop what was seen so far (each wait scans it all, holding the GIL the stamping
        thread needs)."""
        with self._cond:
            self.seen.clear()

    def publish(self, topic: str, body: dict[str, Any]) -> float:
        import json

        sent = time.monotonic()
        self.client.publish(topic, json.dumps(body, ensure_ascii=False), qos=1)
        return sent


def press(wire: Wire, workflow_id: str, event_id: str) -> tuple[float, float]:
    """Start a workflow of the three OPS, wait until every task runs, press cancel on the PUI:
    the press and the last of its three `task/cancel` on the wire (monotonic seconds)."""
    wire.forget()  # the earlier presses' messages: nothing below waits for them
    wire.publish(f"{ROOT}/workflow/request", workflow(workflow_id))
    for op in OPS:
        wire.wait(running(f"{workflow_id}:{op.replace('.', '_')}"), 1)
    pressed = wire.publish(f"{ROOT}/pui/event", {"event_id": event_id, "kind": "cancel"})
    return pressed, wire.wait(cancel_of(workflow_id), len(OPS))


def run(runs: int, window: float, work: Path) -> None:
    sections = {"taskmanager": {"cancel_confirm_s": window}}
    broker, cloud, runtime = runtime_stack(work, sections=sections)
    runtime.start()
    agents = DeviceAgents(broker.port, ROOT, behaviors={op: Behavior("hold") for op in OPS})
    wire = Wire(broker.port)
    to_cancels, to_stop = [], []
    try:
        for n in range(runs):
            hung = n % 2 == 1
            agents.behaviors["mobility.move_to_room"] = Behavior("hung" if hung else "hold")
            wf = f"wf-b{n}"
            pressed, last = press(wire, wf, f"p{n}")
            if hung:
                stop = wire.wait(safe_stop_of(wf), 1)
                to_stop.append((stop - pressed) * 1000)
                agents.release(f"{wf}:mobility_move_to_room")
            else:
                to_cancels.append((last - pressed) * 1000)
    finally:
        stop_all(Closer(wire), agents, runtime, cloud, broker)
    print(f"cancel_confirm_s = {window}; {runs} presses, 3 dispatched tasks each")
    print(f"  press -> every task/cancel on the wire  p50 {pct(to_cancels, 0.5):7.2f} ms"
          f"  p99 {pct(to_cancels, 0.99):7.2f} ms  (n={len(to_cancels)})")  # fmt: skip
    print(f"  press -> safe_stop on the wire (silent) p50 {pct(to_stop, 0.5):7.2f} ms"
          f"  p99 {pct(to_stop, 0.99):7.2f} ms  (n={len(to_stop)}; two windows = {2000 * window:.0f} ms)")  # fmt: skip  # noqa: E501
    record("cancel", "press_to_cancels_p99_ms", round(pct(to_cancels, 0.99), 2))
    record("cancel", "press_to_safe_stop_p99_ms", round(pct(to_stop, 0.99), 2))


class Closer:
    """The wire as `stop_all` closes it."""

    def __init__(self, wire: Wire) -> None:
        self._wire = wire

    def close(self) -> None:
        self._wire.client.disconnect()
        self._wire.client.loop_stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--window", type=float, default=0.5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        run(args.runs, args.window, Path(work))


if __name__ == "__main__":
    main()
