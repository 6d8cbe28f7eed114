"""Device agents on MQTT for every capability of the default catalog (`a2a-edge sim devices`),
built on the public helper `a2a_agent.DeviceAgent` so device teams start from code the project
runs in every test.

By default (`auto`) a task runs in the simulated `World`: travel time between rooms, battery
drain and docking, purifier modes, timed content/vital sessions, RUNNING then PROGRESS then
COMPLETED with a growing `seq`, and `P/device/context` (retained) after every change and on
every connect. Scripted faults per operation: `fail`, `block`, `silent` (never answers), `hold`
(RUNNING until cancelled or `complete()`), `hung` (RUNNING, and a cancel is never confirmed:
the cancel hook hangs until `release()`; SPEC 4.2's escalation is tested with it),
`needs_input`, `duplicate` (every callback twice),
`out_of_order` (COMPLETED before the last PROGRESS), `instant`, `complete` (fixed time, no
world). `duplicate` and `out_of_order` break the protocol on purpose (the runtime's dedupe is
tested with them), through the helper's low-level `Task.callback` / `publish_callback`.

The helper dedupes on `task_id` (a command seen again is not executed again; its latest
callback is published once more) and honours cancels (CANCELLED; nothing else is sent after
the cancel arrived). A `safe_stop` command (SPEC 4.2) completes at once unless its operation is
scripted otherwise. `press_pui()` simulates the physical cancel button.

`only` / `exclude` (`sim devices --only CAP… / --exclude CAP…`) narrow what is simulated: the
agent subscribes to those capabilities' topics alone, so a device team's own agent can serve
another capability (or one of these) beside it without the simulator answering for it. Without
either it serves every capability (`+`) and answers the ones it does not know `FAILED
unsupported_operation`. Its callbacks carry `agent` (the name `workflows trace` shows). Each
set has a broker session of its own (`session_id`), and a narrowed one ends the
serve-everything session first: its `+` subscriptions would otherwise outlive a restart.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from a2a_agent import DeviceAgent, Task
from sim.world import World

SIMULATED = ("air_purifier", "content", "display", "mobility", "speaker", "vital_app")
AGENT_NAME = "sim-devices"  # the `agent` of its callbacks


def served(only: Iterable[str] = (), exclude: Iterable[str] = ()) -> list[str]:
    """The capabilities the simulator subscribes to: `["*"]` (every one) when neither is given;
    `only` must name simulated ones (ValueError otherwise: it would answer them all FAILED)."""
    only, exclude = list(only), set(exclude)
    unknown = sorted(set(only) - set(SIMULATED))
    if unknown:
        raise ValueError(f"not simulated: {', '.join(unknown)} (simulated: {', '.join(SIMULATED)})")
    if not only and not exclude:
        return ["*"]
    return [cap for cap in (only or SIMULATED) if cap not in exclude]


def session_id(root: str, capabilities: list[str]) -> str:
    """The broker session (client id) of a simulator serving `capabilities`: one per set, so a
    restart with other `--only/--exclude` never inherits the subscriptions (and the commands
    queued for them) of another set; the same set keeps its session across restarts."""
    base = f"sim-devices-{root.replace('/', '-')}"
    if capabilities == ["*"]:
        return base
    return f"{base}-{zlib.crc32(','.join(sorted(capabilities)).encode()):08x}"


def end_session(host: str, port: int, client_id: str, protocol: str = "5") -> None:
    """Discard the broker's session of `client_id` (a clean start that expires on disconnect):
    the serve-everything simulator's `+` subscriptions outlive its process for a day, and
    would take (and answer FAILED unsupported_operation) a team's commands when it came back."""
    v5 = protocol == "5"
    client = paho.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=client_id,
        protocol=MQTTProtocolVersion.MQTTv5 if v5 else MQTTProtocolVersion.MQTTv311,
        clean_session=None if v5 else True,
    )
    connected = threading.Event()
    client.on_connect = lambda *_args: connected.set()
    try:
        client.connect(host, port, 10, clean_start=True if v5 else paho.MQTT_CLEAN_START_FIRST_ONLY)
        client.loop_start()
        if not connected.wait(10):
            raise TimeoutError(f"device agents: the broker at {host}:{port} did not answer")
        client.disconnect()
    except OSError as exc:
        raise TimeoutError(f"device agents could not connect: {exc}") from exc
    finally:
        client.loop_stop()


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
        "air_purifier.set_mode": {"purifier_mode": args.get("mode", "auto")},
        "display.show_content": {"content_shown": True},
        "speaker.say": {"spoken": True},
        "vital_app.start_session": {"vital_interaction_ended": "completed"},
        "content.play_guidance": {"guidance_played": True},
    }
    return known.get(op, {})  # the catalog's terminal evidence of each op; none for others


FINALS = {
    "complete": "COMPLETED",
    "fail": "FAILED",
    "block": "BLOCKED",
    "needs_input": "NEEDS_USER_INPUT",
}


@dataclass
class TaskRecord:
    """What the simulator knows of one task: the helper's `Task` (seq, latest callback,
    deliveries), whether a cancel arrived, and the timers of a scripted run."""

    task: Task
    cancelled: bool = False
    timers: list[threading.Timer] = field(default_factory=list)

    @property
    def command(self) -> dict[str, Any]:
        return self.task.command

    @property
    def last(self) -> dict[str, Any] | None:
        return self.task.last

    @property
    def seq(self) -> int:
        return self.task.seq

    @property
    def deliveries(self) -> int:
        return self.task.deliveries


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
        only: Iterable[str] = (),
        exclude: Iterable[str] = (),
    ) -> None:
        self.root = root
        self.capabilities = served(only, exclude)
        self.world = world or World(time_scale=time_scale)
        self.behaviors = dict(behaviors or {})
        self.tasks: dict[str, TaskRecord] = {}
        self.order: list[str] = []  # task ids in the order first received
        self.cancels: list[dict[str, Any]] = []
        self.received_at: dict[str, float] = {}  # monotonic, first delivery of each command
        self.completed_at: dict[str, float] = {}  # monotonic, COMPLETED published (instant)
        self._hung: dict[str, threading.Event] = {}  # task_id -> released (the `hung` fault)
        self._lock = threading.Condition()
        client_id = session_id(root, self.capabilities)
        if self.capabilities != ["*"]:  # the serve-everything session must not answer for it
            end_session(host, port, session_id(root, ["*"]), protocol)
        self.agent = DeviceAgent(
            root,
            client_id=client_id,
            host=host,
            port=port,
            protocol=protocol,
            reconnect_max_s=1,
            auto_running=False,  # `silent` sends nothing; the others send RUNNING themselves
            history=10**9,  # tests look at every task; dedupe remembers them all
            on_inbound=self._seen,
            on_connect=lambda _session_present: self.publish_context(),
            name=AGENT_NAME,
            # SPEC 4.8: a retained status per capability it answers for (`+` answers all)
            presence=SIMULATED if self.capabilities == ["*"] else self.capabilities,
        )
        # it never blocks (timers and world threads do the waiting): run it on the dispatcher
        for capability in self.capabilities:
            self.agent.handle(
                capability, "*", self._execute, on_cancel=self._on_cancel, inline=True
            )
        try:
            self.agent.start(10)
        except ConnectionError as exc:
            self.agent.close()
            raise TimeoutError("device agents could not connect") from exc

    def _seen(self, kind: str, body: dict[str, Any], task: Task | None) -> None:
        """Every command and cancel, in arrival order (the helper's dispatcher thread)."""
        with self._lock:
            if kind == "cancel":
                self.cancels.append(body)
                record = self.tasks.get(str(body.get("task_id")))
                if record is not None:  # nothing but CANCELLED goes out from now on
                    record.cancelled = True
                    for timer in record.timers:
                        timer.cancel()
            elif task is not None and task.task_id not in self.tasks:
                self.received_at.setdefault(task.task_id, task.received_at)
                self.tasks[task.task_id] = TaskRecord(task)
                self.order.append(task.task_id)
            self._lock.notify_all()

    def behavior(self, command: dict[str, Any]) -> Behavior:
        key = f"{command.get('capability_id')}.{command.get('operation_id')}"
        return self.behaviors.get(key, Behavior())

    def _execute(self, task: Task) -> None:
        """The handler of every operation (the helper runs it once per task_id); it returns
        at once: timers and world threads send the later callbacks."""
        behavior = self.behavior(task.command)
        if behavior.kind == "silent":
            return
        if behavior.kind == "hung":
            with self._lock:
                self._hung.setdefault(task.task_id, threading.Event())
            self._send(task, "RUNNING", {})
            return
        if behavior.kind == "instant" or (
            task.command.get("safe_stop") is True
            and behavior.kind == "auto"
            and task.command.get("capability_id") != "air_purifier"
        ):
            self._instant(task)
            return
        if behavior.kind in ("auto", "duplicate", "out_of_order"):
            self._run_in_world(task, behavior.kind)
            return
        self._send(task, "RUNNING", {})
        if behavior.kind in FINALS:
            self._later(task, behavior.after_s / 2, "PROGRESS", progress=50)
            evidence = (
                behavior.evidence
                if behavior.evidence is not None
                else (default_evidence(task.command) if behavior.kind == "complete" else None)
            )
            final = FINALS[behavior.kind]
            self._later(task, behavior.after_s, final, reason=behavior.reason, evidence=evidence)

    def _run_in_world(self, task: Task, kind: str) -> None:
        plan = self.world.plan(task.command)
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
            target=self._play, daemon=True, args=(task, steps, plan.apply, kind)
        )
        worker.start()

    def _play(
        self,
        task: Task,
        steps: list[tuple[float, str, dict[str, Any]]],
        apply: Callable[[], None],
        kind: str,
    ) -> None:
        """Publish a task's callbacks in order, each at its time, unless it is cancelled."""
        start = time.monotonic()
        held: dict[str, Any] | None = None
        for at, status, extra in steps:
            time.sleep(max(0.0, start + at - time.monotonic()))
            late = kind == "out_of_order" and status == "PROGRESS" and extra["progress"] == 75
            with self._lock:
                if self.tasks[task.task_id].cancelled:
                    return
                if status == "COMPLETED":
                    apply()
                if late:  # numbered now, sent after COMPLETED with its lower seq
                    held = task.callback(status, **extra)
                    continue
                self._send(task, status, extra)
                if kind == "duplicate" and task.last is not None:
                    self.agent.publish_callback(task.last)
                if status == "COMPLETED" and held is not None:
                    self.agent.publish_callback(held)
        if steps[-1][1] == "COMPLETED":
            self.publish_context()

    def _send(self, task: Task, status: str, extra: dict[str, Any]) -> None:
        """The task's next callback (seq + 1), unless a cancel arrived first."""
        with self._lock:
            if self.tasks[task.task_id].cancelled:
                return
            task.report(status, **extra)
            self._lock.notify_all()

    def _on_cancel(self, task: Task) -> None:
        """The helper reports CANCELLED when this returns; a `hung` task's hook waits for
        `release()` (at most a minute: the helper's cancel pool has two threads)."""
        with self._lock:
            released = self._hung.get(task.task_id)
        if released is not None:
            released.wait(60)

    def release(self, task_id: str) -> None:
        """A `hung` agent comes back: the cancel it sat on is confirmed (CANCELLED)."""
        with self._lock:
            self._hung.setdefault(task_id, threading.Event()).set()

    def publish_context(self, client: paho.Client | None = None) -> None:
        """`P/device/context`, retained: the latest state of the robot."""
        if client is None:
            self.agent.publish("device/context", self.world.context(), retain=True)
            return
        client.publish(
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
        self.agent.publish("pui/event", body)
        return event_id

    def _instant(self, task: Task) -> None:
        """RUNNING and COMPLETED at once (for benchmarks)."""
        task.running()
        self.completed_at[task.task_id] = time.monotonic()
        task.completed(default_evidence(task.command))

    def _later(self, task: Task, delay: float, status: str, **extra: Any) -> None:
        timer = threading.Timer(delay, self._send, args=(task, status, extra))
        timer.daemon = True
        with self._lock:
            record = self.tasks[task.task_id]
            if record.cancelled:
                return
            record.timers.append(timer)
        timer.start()

    def complete(self, task_id: str, evidence: dict[str, Any] | None = None) -> None:
        """Finish a held task now (tests drive `hold` behaviour by hand)."""
        with self._lock:
            task = self.tasks[task_id].task
            task.report(
                "COMPLETED", progress=100, evidence=evidence or default_evidence(task.command)
            )
            self._lock.notify_all()

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
        with self._lock:
            for released in self._hung.values():
                released.set()
        self.agent.close()
