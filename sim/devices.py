"""Device agents on MQTT for every capability of the default catalog (`a2a-edge sim devices`).

By default (`auto`) a task runs in the simulated `World`: travel time between rooms, battery
drain and docking, purifier modes, timed content/vital sessions, RUNNING then PROGRESS then
COMPLETED with a growing `seq`, and `P/device/context` (retained) after every change. Scripted
faults per operation: `fail`, `block`, `silent` (never answers), `hold` (RUNNING until
cancelled or `complete()`), `needs_input`, `duplicate` (every callback twice), `out_of_order`
(COMPLETED before the last PROGRESS), `instant`, `complete` (fixed time, no world).

Each agent dedupes on `task_id`: a command seen again is not executed again; its latest callback
is published once more instead. Cancels are honoured: the task stops and reports CANCELLED.
`press_pui()` simulates the physical cancel button.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import paho.mqtt.client as paho

from sim.mqttc import start_client
from sim.world import World


@dataclass(frozen=True)
class Behavior:
    """How an operation behaves (see the module doc); `after_s` is how long scripted kinds
    take (`auto` takes what the world says)."""

    kind: str = "auto"
    after_s: float = 0.05
    reason: str | None = None
    evidence: dict[str, Any] | None = None


def default_evidence(command: dict[str, Any]) -> dict[str, Any]:
    op = f"{command.get('capability_id')}.{command.get('operation_id')}"
    args = command.get("args") or {}
    known: dict[str, dict[str, Any]] = {
        "mobility.move_to_room": {"arrived_room": args.get("room")},
        "mobility.return_to_dock": {"docked": True},
        "air_purifier.start": {"purifier_mode": args.get("mode", "auto")},
        "air_purifier.stop": {"purifier_mode": "off"},
        "vital_app.start_session": {"vital_interaction_ended": "completed"},
    }
    return known.get(op, {"done": True})


def _callback(
    task_id: str,
    seq: int,
    status: str,
    progress: Any = None,
    reason: Any = None,
    evidence: Any = None,
) -> dict[str, Any]:
    """A task callback of SPEC §2.2."""
    return {
        "task_id": task_id,
        "seq": seq,
        "status": status,
        "progress": progress,
        "reason": reason,
        "evidence": evidence,
        "ts": None,
    }


@dataclass
class TaskRecord:
    command: dict[str, Any]
    seq: int = 0
    last: dict[str, Any] | None = None
    deliveries: int = 1
    cancelled: bool = False
    timers: list[threading.Timer] = field(default_factory=list)


class DeviceAgents:
    def __init__(
        self,
        port: int,
        root: str,
        *,
        host: str = "127.0.0.1",
        behaviors: dict[str, Behavior] | None = None,
        world: World | None = None,
        time_scale: float = 0.02,
        protocol: str = "5",
    ) -> None:
        self.root = root
        self.world = world or World(time_scale=time_scale)
        self.behaviors = dict(behaviors or {})
        self.tasks: dict[str, TaskRecord] = {}
        self.order: list[str] = []  # task ids in the order first received
        self.cancels: list[dict[str, Any]] = []
        self.received_at: dict[str, float] = {}  # monotonic, first delivery of each command
        self.completed_at: dict[str, float] = {}  # monotonic, COMPLETED published (instant)
        self._lock = threading.Condition()
        self._connected = threading.Event()
        self.client = start_client(
            host,
            port,
            f"sim-devices-{root.replace('/', '-')}",
            self._on_connect,
            self._on_message,
            protocol,
        )
        if not self._connected.wait(10):
            raise TimeoutError("device agents could not connect")

    def _on_connect(self, client: paho.Client, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
        if reason.is_failure:
            return
        client.subscribe(f"{self.root}/task/command/+", qos=1)
        client.subscribe(f"{self.root}/task/cancel/+", qos=1)
        # `client`, not `self.client`: this may run before start_client() has returned
        self.publish_context(client)
        self._connected.set()

    def _on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        try:
            body = json.loads(msg.payload.decode("utf-8"))
        except ValueError:
            return
        if "/task/cancel/" in msg.topic:
            self._cancel(body)
        else:
            self._command(body)

    def behavior(self, command: dict[str, Any]) -> Behavior:
        key = f"{command.get('capability_id')}.{command.get('operation_id')}"
        return self.behaviors.get(key, Behavior())

    def _command(self, command: dict[str, Any]) -> None:
        task_id = str(command.get("task_id"))
        self.received_at.setdefault(task_id, time.monotonic())
        with self._lock:
            record = self.tasks.get(task_id)
            if record is not None:
                record.deliveries += 1
                last = record.last
            else:
                self.tasks[task_id] = TaskRecord(command)
                self.order.append(task_id)
                last = None
            self._lock.notify_all()
        if record is not None:
            if last is not None:
                self._publish(last)
            return
        behavior = self.behavior(command)
        if behavior.kind == "silent":
            return
        if behavior.kind == "instant":
            self._instant(task_id, command)
            return
        if behavior.kind in ("auto", "duplicate", "out_of_order"):
            self._run_in_world(task_id, command, behavior.kind)
            return
        self._later(task_id, 0.0, "RUNNING")
        finals = {
            "complete": "COMPLETED",
            "fail": "FAILED",
            "block": "BLOCKED",
            "needs_input": "NEEDS_USER_INPUT",
        }
        if behavior.kind in finals:
            self._later(task_id, behavior.after_s / 2, "PROGRESS", progress=50)
            evidence = (
                behavior.evidence
                if behavior.evidence is not None
                else (default_evidence(command) if behavior.kind == "complete" else None)
            )
            self._later(
                task_id,
                behavior.after_s,
                finals[behavior.kind],
                reason=behavior.reason,
                evidence=evidence,
            )

    def _run_in_world(self, task_id: str, command: dict[str, Any], kind: str) -> None:
        plan = self.world.plan(command)
        steps: list[tuple[float, str, dict[str, Any]]] = [(0.0, "RUNNING", {})]
        if plan.fail_reason:
            steps.append((0.0, "FAILED", {"reason": plan.fail_reason}))
        else:
            steps += [
                (plan.duration_s * share, "PROGRESS", {"progress": int(share * 100)})
                for share in (0.25, 0.5, 0.75)
            ]
            steps.append(
                (plan.duration_s, "COMPLETED", {"progress": 100, "evidence": plan.evidence})
            )
        worker = threading.Thread(
            target=self._play, daemon=True, args=(task_id, steps, plan.apply, kind)
        )
        worker.start()

    def _play(
        self,
        task_id: str,
        steps: list[tuple[float, str, dict[str, Any]]],
        apply: Callable[[], None],
        kind: str,
    ) -> None:
        """Publish a task's callbacks in order, each at its time, unless it is cancelled."""
        start = time.monotonic()
        for at, status, extra in steps:
            time.sleep(max(0.0, start + at - time.monotonic()))
            body = self._advance(task_id, status, extra, apply if status == "COMPLETED" else None)
            if body is None:
                return
            if kind == "out_of_order" and status == "PROGRESS" and extra.get("progress") == 75:
                held = body  # sent after COMPLETED, with its lower seq
                continue
            self._publish(body)
            if kind == "duplicate":
                self._publish(body)
            if status == "COMPLETED" and kind == "out_of_order":
                self._publish(held)
        if steps[-1][1] == "COMPLETED":
            self.publish_context()

    def publish_context(self, client: paho.Client | None = None) -> None:
        """`P/device/context`, retained: the latest state of the robot."""
        (client or self.client).publish(
            f"{self.root}/device/context",
            json.dumps(self.world.context(), ensure_ascii=False),
            qos=1,
            retain=True,
        )

    def press_pui(self, workflow_id: str | None = None) -> str:
        """The physical cancel button (no workflow: every active one)."""
        event_id = f"pui-{uuid.uuid4().hex[:12]}"
        body: dict[str, Any] = {"event_id": event_id, "kind": "cancel"}
        if workflow_id:
            body["workflow_id"] = workflow_id
        self.client.publish(f"{self.root}/pui/event", json.dumps(body), qos=1)
        return event_id

    def _instant(self, task_id: str, command: dict[str, Any]) -> None:
        """RUNNING and COMPLETED at once, from the network thread (for benchmarks)."""
        with self._lock:
            record = self.tasks[task_id]
            record.seq = 2
            final = _callback(task_id, 2, "COMPLETED", 100, None, default_evidence(command))
            record.last = final
        self._publish(_callback(task_id, 1, "RUNNING", None, None, None))
        self.completed_at[task_id] = time.monotonic()
        self._publish(final)

    def _advance(
        self,
        task_id: str,
        status: str,
        extra: dict[str, Any],
        before: Callable[[], None] | None = None,
    ) -> dict[str, Any] | None:
        """The task's next callback (seq + 1), or None once it was cancelled."""
        with self._lock:
            record = self.tasks[task_id]
            if record.cancelled:
                return None
            if before is not None:
                before()
            record.seq += 1
            record.last = _callback(task_id, record.seq, status, **extra)
            return record.last

    def _later(self, task_id: str, delay: float, status: str, **extra: Any) -> None:
        def fire() -> None:
            body = self._advance(task_id, status, extra)
            if body is not None:
                self._publish(body)

        timer = threading.Timer(delay, fire)
        timer.daemon = True
        self.tasks[task_id].timers.append(timer)
        timer.start()

    def _cancel(self, body: dict[str, Any]) -> None:
        task_id = str(body.get("task_id"))
        with self._lock:
            self.cancels.append(body)
            record = self.tasks.get(task_id)
            if record is None or record.cancelled:
                self._lock.notify_all()
                return
            record.cancelled = True
            for timer in record.timers:
                timer.cancel()
            record.seq += 1
            final = _callback(task_id, record.seq, "CANCELLED", None, body.get("reason"), None)
            record.last = final
            self._lock.notify_all()
        self._publish(final)

    def _publish(self, body: dict[str, Any]) -> None:
        self.client.publish(
            f"{self.root}/task/callback", json.dumps(body, ensure_ascii=False), qos=1
        )

    def complete(self, task_id: str, evidence: dict[str, Any] | None = None) -> None:
        """Finish a held task now (tests drive `hold` behaviour by hand)."""
        with self._lock:
            record = self.tasks[task_id]
            record.seq += 1
            body = _callback(
                task_id,
                record.seq,
                "COMPLETED",
                100,
                None,
                evidence or default_evidence(record.command),
            )
            record.last = body
        self._publish(body)

    def wait_for(self, predicate: Callable[[DeviceAgents], bool], timeout_s: float = 10.0) -> None:
        with self._lock:
            if not self._lock.wait_for(lambda: predicate(self), timeout_s):
                raise TimeoutError(
                    f"device agents: condition not met in {timeout_s}s; "
                    f"tasks {self.order}, cancels {self.cancels}"
                )

    def deliveries(self) -> dict[str, int]:
        """How often each task's command arrived (it is executed on the first only)."""
        with self._lock:
            return {task_id: record.deliveries for task_id, record in self.tasks.items()}

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
