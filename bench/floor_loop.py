"""The floor of bench.floor, as a process of its own: bare paho (threaded loop, Nagle off)
→ one SQLite transaction per batch of inbound messages (WAL, `synchronous=FULL`, one row per
message) → the answers published. Nothing else: no validation, no state machine, no outbox.

- `P/turn/request` → the row → an httpx POST of the turn to the sim cloud (the body our runtime
  sent for a turn, captured by bench.floor, with this turn's id and text) → `P/turn/response`;
- `P/workflow/request` → the row → the command of every step without `depends_on` on
  `P/task/command/<capability>`;
- `P/task/callback/<capability>` → the row → on COMPLETED the command of every step whose
  dependencies are now all done, or after the last step one `P/workflow/event`
  WORKFLOW_COMPLETED (other callbacks are only recorded);
- `P/pui/event` `{event_id, kind: "cancel", workflow_id?}` → the row → `P/task/cancel/<capability>`
  (reason `pui`) for every task it commanded that has not completed (of that workflow, or of
  every one), then `P/pui/result` (`cancelled` with the workflow ids, or `nothing_active`).

    .venv/bin/python -m bench.floor_loop --db floor.db --port N --root a2a/robot-floor \\
        --cloud http://127.0.0.1:M --template turn.json
"""

from __future__ import annotations

import argparse
import json
import queue
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from edge.channel.mqtt import no_delay


class Floor:
    def __init__(self, args: argparse.Namespace) -> None:
        self.root: str = args.root
        template = json.loads(Path(args.template).read_text(encoding="utf-8"))
        self.turn_body: dict[str, Any] = template["body"]
        self.id_keys: list[str] = template["id_keys"]
        self.db = sqlite3.connect(args.db, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS inbound (id INTEGER PRIMARY KEY, topic TEXT, body BLOB)"
        )
        self.http = httpx.Client(base_url=args.cloud, timeout=10)
        self.flows: dict[str, Flow] = {}  # workflow_id -> its steps and what is done
        self.running: dict[str, tuple[str, str]] = {}  # task_id -> (workflow_id, capability)
        self.inbox: queue.SimpleQueue[tuple[str, bytes]] = queue.SimpleQueue()
        self.client = paho.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id="bench-floor",
            protocol=MQTTProtocolVersion.MQTTv5,
        )
        self.client.on_connect = self._on_connect
        self.client.on_socket_open = no_delay  # as ours: no 40 ms delayed-ACK stalls
        self.client.on_message = lambda _c, _u, m: self.inbox.put((m.topic, bytes(m.payload)))
        self.client.connect("127.0.0.1", args.port, keepalive=30)

    def _on_connect(self, client: paho.Client, _u: Any, _f: Any, _r: Any, _p: Any) -> None:
        kinds = ("turn/request", "workflow/request", "task/callback/+", "pui/event")
        for kind in kinds:
            client.subscribe(f"{self.root}/{kind}", qos=1)

    def run(self) -> None:
        self.client.loop_start()
        while True:
            batch = [self.inbox.get()]
            while True:
                try:
                    batch.append(self.inbox.get_nowait())
                except queue.Empty:
                    break
            self.db.execute("BEGIN")
            for topic, payload in batch:
                self.db.execute("INSERT INTO inbound (topic, body) VALUES (?, ?)", (topic, payload))
            self.db.execute("COMMIT")
            for topic, payload in batch:
                self.handle(topic[len(self.root) + 1 :], json.loads(payload))

    def publish(self, kind: str, body: dict[str, Any]) -> None:
        self.client.publish(f"{self.root}/{kind}", json.dumps(body, ensure_ascii=False), qos=1)

    def handle(self, kind: str, body: dict[str, Any]) -> None:
        if kind == "turn/request":
            request = dict(self.turn_body, recognized_text=body["recognized_text"])
            request.update({key: body["turn_id"] for key in self.id_keys})
            answer = self.http.post("/v1/a2a/turn", json=request).json()
            self.publish(
                "turn/response",
                {"turn_id": body["turn_id"], "status": "ok", "text": answer.get("response_text")},
            )
        elif kind == "workflow/request":
            flow = Flow(str(body["workflow_id"]), body["steps"])
            self.flows[flow.workflow_id] = flow
            self.dispatch(flow)
        elif kind.startswith("task/callback/") and body.get("status") == "COMPLETED":
            self.completed(str(body.get("task_id")))
        elif kind == "pui/event" and body.get("kind") == "cancel":
            self.cancel(str(body["event_id"]), body.get("workflow_id"))

    def completed(self, task_id: str) -> None:
        """The steps it unblocks commanded, or the workflow's WORKFLOW_COMPLETED."""
        where = self.running.pop(task_id, None)
        found = self.flows.get(where[0]) if where is not None else None
        if found is None:
            return
        found.done.add(task_id.split(":", 1)[1])
        if len(found.done) < len(found.steps):
            self.dispatch(found)
            return
        del self.flows[found.workflow_id]
        self.publish(
            "workflow/event", {"workflow_id": found.workflow_id, "status": "WORKFLOW_COMPLETED"}
        )

    def dispatch(self, flow: Flow) -> None:
        """The command of every step not sent yet whose dependencies are all done."""
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for step in flow.steps:
            step_id = step["step_id"]
            if step_id in flow.sent or not flow.done.issuperset(step.get("depends_on") or ()):
                continue
            flow.sent.add(step_id)
            task_id = f"{flow.workflow_id}:{step_id}"
            self.running[task_id] = (flow.workflow_id, step["capability_id"])
            command = {
                "task_id": task_id,
                "workflow_id": flow.workflow_id,
                "step_id": step_id,
                "capability_id": step["capability_id"],
                "operation_id": step["operation_id"],
                "args": step.get("args") or {},
                "attempt": 1,
                "issued_at": now,
            }
            self.publish(f"task/command/{step['capability_id']}", command)

    def cancel(self, event_id: str, workflow_id: str | None) -> None:
        """A press: every commanded task not completed (of `workflow_id`, or of every
        workflow) gets its `task/cancel`; then the press its `pui/result`."""
        ended: list[str] = []
        for task_id, (owner, capability) in list(self.running.items()):
            if workflow_id is not None and owner != workflow_id:
                continue
            del self.running[task_id]
            self.publish(
                f"task/cancel/{capability}",
                {"task_id": task_id, "workflow_id": owner, "reason": "pui"},
            )
            if owner not in ended:
                ended.append(owner)
        for owner in ended:
            self.flows.pop(owner, None)
        status = "cancelled" if ended else "nothing_active"
        self.publish("pui/result", {"event_id": event_id, "status": status, "workflow_ids": ended})


class Flow:
    """A workflow's steps, those commanded and those completed (by step id)."""

    def __init__(self, workflow_id: str, steps: list[dict[str, Any]]) -> None:
        self.workflow_id, self.steps = workflow_id, steps
        self.sent: set[str] = set()
        self.done: set[str] = set()


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--db", "--root", "--cloud", "--template"):
        parser.add_argument(name, required=True)
    parser.add_argument("--port", type=int, required=True)
    Floor(parser.parse_args()).run()


if __name__ == "__main__":
    main()
