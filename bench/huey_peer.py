"""The peer a Python team would build without us (bench.peers): one `SqliteHuey(fsync=True)` task
per step, run by huey's own consumer in a process of its own, that publishes the step's command
on MQTT (QoS 1, the same topic and payload as our TaskManager's) to the device agents and waits
for the agent's COMPLETED callback; huey stores what the task returns.

One paho client for the whole consumer process, its network loop in paho's thread
(`loop_start`), Nagle off (TCP_NODELAY, as ours); the worker threads publish through it and
wait on an event each, found by `task_id` when the callback arrives. The producer side
(`job_task`) only enqueues. A step holds its operation's resource as ours does (the catalog's
`speaker.say` takes `voice`: the robot does not say two things at once), with a lock per
resource in the consumer: without it the peer would run in parallel what ours must not.

    .venv/bin/python -m bench.huey_peer --db huey.db --port 1883 --root a2a/robot-bench --workers 4
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import paho.mqtt.client as paho
from huey import SqliteHuey
from huey.api import TaskWrapper
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

WAIT_S = 30.0
RESOURCES = {("speaker", "say"): "voice"}  # the catalog's, for the operations the bench runs
_held: dict[str, threading.Lock] = {}


def _no_delay(_client: paho.Client, _userdata: Any, sock: Any) -> None:
    """Nagle off, as our runtime and the agents do: without it every PUBACK-then-PUBLISH hop
    waits ~40 ms for a delayed ACK, and the peer would be a straw man."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Correlator:
    """The consumer's one paho client: publishes commands, hands each terminal callback to the
    worker waiting on its `task_id`."""

    def __init__(self, port: int, root: str) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self._connected = threading.Event()
        self.client = paho.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id="huey-peer",
            protocol=MQTTProtocolVersion.MQTTv5,
        )
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_socket_open = _no_delay
        self.client.on_subscribe = lambda *_a: self._connected.set()
        self.client.connect("127.0.0.1", port, keepalive=30)
        self.client.loop_start()
        if not self._connected.wait(10):
            raise TimeoutError("huey peer: not subscribed within 10 s")

    def _on_connect(self, client: paho.Client, _u: Any, _f: Any, _r: Any, _p: Any) -> None:
        # an agent answers on its capability's own topic, `P/task/callback/<capability_id>`
        # (SPEC §2); the shared `P/task/callback` is still allowed
        client.subscribe([(f"{self.root}/task/callback", 1), (f"{self.root}/task/callback/+", 1)])

    def _on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        body = json.loads(msg.payload)
        if body.get("status") not in ("COMPLETED", "FAILED", "BLOCKED", "CANCELLED", "TIMEOUT"):
            return
        with self._lock:
            waiting = self._waiting.pop(str(body.get("task_id")), None)
        if waiting is not None:
            waiting[1].append(body)
            waiting[0].set()

    def run(self, command: dict[str, Any]) -> dict[str, Any]:
        """Publish the command and wait for its terminal callback."""
        done: threading.Event = threading.Event()
        got: list[dict[str, Any]] = []
        with self._lock:
            self._waiting[command["task_id"]] = (done, got)
        topic = f"{self.root}/task/command/{command['capability_id']}"
        self.client.publish(topic, json.dumps(command, ensure_ascii=False), qos=1)
        if not done.wait(WAIT_S):
            raise TimeoutError(f"no terminal callback for {command['task_id']}")
        return got[0]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


_correlator: Correlator | None = None


def run_step(step: dict[str, Any], workflow_id: str) -> dict[str, Any]:
    """The task: the command as our TaskManager words it (SPEC §2.1), published, awaited."""
    assert _correlator is not None, "the task runs in the consumer (serve())"
    now = datetime.now(UTC)

    def iso(at: datetime) -> str:
        return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    command = {
        "task_id": f"{workflow_id}:{step['step_id']}",
        "workflow_id": workflow_id,
        "step_id": step["step_id"],
        "capability_id": step["capability_id"],
        "operation_id": step["operation_id"],
        "args": step.get("args") or {},
        "attempt": 1,
        "issued_at": iso(now),
        "ack_deadline": iso(now + timedelta(seconds=5)),
        "deadline": iso(now + timedelta(seconds=60)),
    }
    resource = RESOURCES.get((step["capability_id"], step["operation_id"]))
    lock = _held.setdefault(resource, threading.Lock()) if resource else None
    if lock is None:
        callback = _correlator.run(command)
    else:
        with lock:
            callback = _correlator.run(command)
    return {"task_id": command["task_id"], "status": callback["status"]}


def job_task(db: str) -> tuple[SqliteHuey, TaskWrapper]:
    """The huey instance on `db` and `run_step` registered on it (same name on both sides)."""
    huey = SqliteHuey(filename=db, fsync=True)
    return huey, huey.task(retries=0)(run_step)


def serve(db: str, port: int, root: str, workers: int) -> None:
    """huey's consumer with `workers` thread workers; SIGTERM ends it."""
    global _correlator
    logging.basicConfig(level=logging.WARNING)
    _correlator = Correlator(port, root)
    huey, _task = job_task(db)
    consumer = huey.create_consumer(
        workers=workers,
        worker_type="thread",
        periodic=False,
        initial_delay=0.001,  # poll the queue table every 1-10 ms: huey's SQLite storage polls
        max_delay=0.01,
        check_worker_health=False,
    )
    try:
        consumer.run()
    finally:
        _correlator.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    from bench import huey_peer  # the task's module must be `bench.huey_peer` on both sides

    huey_peer.serve(args.db, args.port, args.root, args.workers)


if __name__ == "__main__":
    main()
