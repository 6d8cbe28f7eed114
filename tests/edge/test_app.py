"""The application layer in-process: every input's outcome against a real SQLite file, a
recording wire and the cloud as an `httpx.MockTransport` — no broker, no subprocess."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_common.clock import ManualClock
from a2a_common.sqlite import StorageUnavailable
from edge.app.device import DeviceApp
from edge.channel.topics import (
    AdminRequestMsg,
    Arrival,
    DeviceContextMsg,
    ForgetMsg,
    PuiEventMsg,
    TaskCallbackMsg,
    TurnRequestMsg,
    WorkflowRequestMsg,
)
from edge.config.settings import Secrets, Settings
from edge.wiring import build_app, open_db
from tests.taskmanager.helpers import MOVE_PURIFY, T0

ROOT = "a2a/robot-app"
MOVE, PURIFY = "wf-1:step_move", "wf-1:step_purify"
PURIFIER = {  # on_restart: resend (the shipped catalog)
    "workflow_id": "wf-ap",
    "steps": [
        {"step_id": "s", "capability_id": "air_purifier", "operation_id": "start", "args": {}}
    ],
}


class Wire:
    """Records what the app hands to the broker."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        expiry_s: int | None = None,
    ) -> int:
        self.sent.append((topic, json.loads(payload)))
        return len(self.sent)

    def on(self, suffix: str) -> list[Any]:
        return [body for topic, body in self.sent if topic == f"{ROOT}/{suffix}"]


class Cloud:
    """The planner as a MockTransport handler: scripted turn answers, sync acks everything."""

    def __init__(self) -> None:
        self.down = False
        self.turn: dict[str, Any] = {}
        self.requests: list[tuple[str, Any]] = []
        self.on_turn: Any = None  # called with each turn request before it is answered

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("cloud down", request=request)
        body = json.loads(request.content)
        self.requests.append((request.url.path, body))
        if request.url.path == "/v1/a2a/turn":
            if self.on_turn is not None:
                self.on_turn(body)
            answer = {"request_id": body["request_id"], "route_family": "ODL"}
            return httpx.Response(200, json={**answer, "assistant_text": "네", **self.turn})
        if request.url.path == "/v1/a2a/memory/sync":
            acked = [w["write_id"] for w in body["writes"]]
            return httpx.Response(200, json={"acked": acked})
        return httpx.Response(200, json={"decision": None})

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]


class Robot:
    def __init__(self, tmp_path: Path, *, live: bool = True, **sections: Any) -> None:
        self.settings = Settings.model_validate(
            {"device_id": "robot-app", "state_dir": str(tmp_path / "state"), **sections}
        )
        self.clock = ManualClock(T0)
        self.cloud = Cloud()
        self.wire = Wire()
        self.app = self.open(live=live)

    def open(self, *, live: bool = True, attach: bool = True) -> DeviceApp:
        app = build_app(
            self.settings,
            Secrets(),
            db=open_db(self.settings),
            clock=self.clock,
            live=live,
            transport=httpx.MockTransport(self.cloud),
        )
        app.tm.reload()
        if attach:
            app.attach(self.wire)
        return app

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.app.memory.db.execute(sql).fetchall()]

    def arrival(self, kind: str) -> Arrival:
        return Arrival(f"{ROOT}/{kind}", time.perf_counter())

    def push(self, workflow: dict[str, Any] | None = None) -> None:
        msg = WorkflowRequestMsg.model_validate(workflow or MOVE_PURIFY)
        self.app.take_workflow(msg, self.arrival("workflow/request"))

    def callback(self, task_id: str, seq: int, status: str, **extra: Any) -> None:
        msg = TaskCallbackMsg(task_id=task_id, seq=seq, status=status, **extra)  # type: ignore[arg-type]
        self.app.take_callback(msg, self.arrival("task/callback"))

    def admin(self, request_id: str, command: str, **args: Any) -> Any:
        msg = AdminRequestMsg(request_id=request_id, command=command, args=args)  # type: ignore[arg-type]
        self.app.take_admin(msg, self.arrival("admin/request"))
        return self.wire.on("admin/response")[-1]

    def say(self, turn_id: str, text: str, **extra: Any) -> Any:
        """A turn from arrival to its `P/turn/response`, on a loop of its own."""

        async def go() -> None:
            msg = TurnRequestMsg(turn_id=turn_id, recognized_text=text, **extra)
            self.app.take_turn(msg, self.arrival("turn/request"))
            await asyncio.gather(*self.app.turns_in_flight)

        asyncio.run(go())
        return [r for r in self.wire.on("turn/response") if r["turn_id"] == turn_id]

    def events(self, task_id: str | None = None) -> list[str]:
        return [
            e["status"]
            for e in self.wire.on("workflow/event")
            if task_id is None or e["task_id"] == task_id
        ]


@pytest.fixture
def robot(tmp_path: Path) -> Iterator[Robot]:
    robot = Robot(tmp_path)
    yield robot
    asyncio.run(robot.app.close())


def test_a_turn_is_recorded_answered_and_its_workflow_dispatched(robot: Robot) -> None:
    robot.cloud.turn = {"device_workflow_requests": [MOVE_PURIFY]}
    [answer] = robot.say("t1", "안방으로 가서 청정해줘")
    assert answer["status"] == "ok" and answer["workflow_ids"] == ["wf-1"]
    [command] = robot.wire.on("task/command/mobility")
    assert command["task_id"] == MOVE and command["attempt"] == 1
    assert robot.rows("SELECT status FROM pairs") == [("ok",)]
    assert robot.app.memory.state("active_workflow_id") == "wf-1"
    assert robot.cloud.paths().count("/v1/a2a/turn") == 1


def test_a_redelivered_turn_is_taken_once(robot: Robot) -> None:
    robot.say("t1", "안녕")
    assert robot.say("t1", "안녕") == robot.wire.on("turn/response")
    assert robot.rows("SELECT count(*) FROM pairs") == [(1,)]
    assert robot.cloud.paths().count("/v1/a2a/turn") == 1


def test_device_context_is_kept_and_goes_with_the_next_turn(robot: Robot) -> None:
    context = DeviceContextMsg.model_validate({"current_room": "거실", "battery": 50})
    robot.app.take_device_context(context, robot.arrival("device/context"))
    robot.say("t1", "안녕", device_context={"battery": 40})
    [sent] = [body for path, body in robot.cloud.requests if path == "/v1/a2a/turn"]
    assert sent["device_context"] == {"current_room": "거실", "battery": 40}
    assert robot.app.memory.state("device_context") == {"current_room": "거실", "battery": 50}


def test_a_turn_while_the_cloud_is_away_is_answered_offline_and_a_local_intent_cancels(
    robot: Robot,
) -> None:
    robot.push()
    robot.cloud.down = True
    [answer] = robot.say("t1", "멈춰")
    assert answer["status"] == "offline" and answer["route_family"] == "LOCAL"
    assert answer["error"].startswith("cloud_unavailable")
    assert robot.wire.on("task/cancel/mobility")[0]["reason"] == "user"
    assert robot.rows("SELECT status FROM pairs") == [("offline",)]
    assert robot.app.tm.active_ids() == []


def test_a_refused_cloud_answer_closes_the_turn_as_an_error(robot: Robot) -> None:
    robot.cloud.turn = {"route_family": ""}  # not the contract
    [answer] = robot.say("t1", "안녕")
    assert answer["status"] == "error" and answer["error"].startswith("cloud_error")
    assert robot.rows("SELECT status FROM pairs") == [("error",)]


def test_callbacks_move_the_workflow_and_a_repeat_is_applied_once(robot: Robot) -> None:
    robot.push()
    robot.callback(MOVE, 1, "RUNNING")
    robot.callback(MOVE, 2, "COMPLETED", evidence={"arrived_room": "안방"})
    robot.callback(MOVE, 2, "COMPLETED", evidence={"arrived_room": "안방"})
    assert robot.events(MOVE) == ["DISPATCHED", "RUNNING", "COMPLETED"]
    [purify] = robot.wire.on("task/command/air_purifier")
    assert purify["task_id"] == PURIFY
    robot.callback(PURIFY, 1, "COMPLETED")
    assert robot.events(None)[-1] == "WORKFLOW_COMPLETED"
    assert robot.app.tm.active_ids() == []
    assert robot.app.memory.state("active_workflow_id") == ""


def test_a_callbacks_mark_is_its_tasks_seq_a_repeat_writes_nothing(robot: Robot) -> None:
    """Issue 36: a callback takes no dedupe row; the step's last seq, committed with it in its
    workflow's row, tells a repeat or a stale seq — also after a restart — and those write
    nothing at all (no unit of work)."""
    robot.push()
    robot.callback(MOVE, 1, "RUNNING")
    robot.callback(MOVE, 3, "PROGRESS", progress=50)
    assert robot.rows("SELECT count(*) FROM inbox_seen WHERE key LIKE 'callback:%'") == [(0,)]
    asyncio.run(robot.app.close())
    robot.app = robot.open()  # the board read back from disk: the seq came with it
    robot.wire.sent.clear()
    changes = robot.app.memory.db.conn.total_changes
    for seq, status in ((3, "PROGRESS"), (2, "PROGRESS"), (1, "RUNNING")):
        robot.callback(MOVE, seq, status, progress=50)  # a repeat; stale ones
    assert robot.app.memory.db.conn.total_changes == changes
    assert robot.wire.sent == []  # silent duplicates: not applied, never refused
    robot.callback(MOVE, 4, "COMPLETED", evidence={"arrived_room": "안방"})
    robot.callback(MOVE, 4, "COMPLETED", evidence={"arrived_room": "안방"})  # ended: duplicate
    assert robot.events(MOVE).count("COMPLETED") == 1  # (the outbox's unacked rows go again)


def test_a_callback_for_an_unknown_task_is_refused_and_writes_nothing(robot: Robot) -> None:
    robot.callback("wf-x:step", 1, "RUNNING")
    [refusal] = robot.wire.on("runtime/error")
    assert refusal["error"] == "unknown_task" and refusal["topic"] == f"{ROOT}/task/callback"
    assert robot.rows("SELECT count(*) FROM inbox_seen") == [(0,)]


def test_a_pui_press_cancels_at_once_and_a_repeat_does_nothing(robot: Robot) -> None:
    robot.push()
    robot.callback(MOVE, 1, "RUNNING")
    press = PuiEventMsg(event_id="e1", kind="cancel")
    robot.app.take_pui(press, robot.arrival("pui/event"))
    robot.app.take_pui(press, robot.arrival("pui/event"))
    [cancel] = robot.wire.on("task/cancel/mobility")
    assert cancel == {"task_id": MOVE, "workflow_id": "wf-1", "reason": "pui"}
    assert robot.events().count("WORKFLOW_CANCELLED") == 1


def test_a_pushed_workflow_that_breaks_the_rules_is_rejected_on_the_wire(robot: Robot) -> None:
    robot.push({**MOVE_PURIFY, "steps": [{**MOVE_PURIFY["steps"][0], "capability_id": "jetpack"}]})
    [event] = robot.wire.on("workflow/event")
    assert event["status"] == "WORKFLOW_REJECTED" and event["workflow_id"] == "wf-1"
    assert robot.app.tm.active_ids() == []


def test_a_deadline_fires_on_tick(robot: Robot) -> None:
    robot.push()
    robot.clock.advance(6)  # past the move's 5 s ack timeout
    robot.app.tick()
    assert robot.events(MOVE)[-1] == "TIMEOUT"
    assert robot.wire.on("task/cancel/mobility")[0]["reason"] == "timeout"


def test_admin_commands_are_applied_once_per_request(robot: Robot) -> None:
    robot.push()
    assert robot.admin("r1", "workflow.cancel", workflow_id="wf-1") == {
        "request_id": "r1",
        "ok": True,
        "result": {"cancelled": ["wf-1"]},
    }
    robot.admin("r1", "workflow.cancel", workflow_id="wf-1")
    first, again = robot.wire.on("admin/response")  # a redelivery: the stored answer again
    assert again == first  # applied once (a second cancel would say "no active workflow")
    assert robot.admin("r2", "workflow.cancel", workflow_id="wf-1")["error"] == (
        "no active workflow wf-1"
    )
    assert robot.admin("r3", "workflow.cancel")["error"] == "args.workflow_id is required"
    assert robot.admin("r4", "memory.forget", scope="pair")["ok"] is False
    assert robot.admin("r5", "memory.revoke")["error"] == "args.key is required"
    replay = robot.admin("r6", "sync.replay", requeue_dead=True)
    assert replay["ok"] is True and replay["result"]["requeued"] == 0


def test_forget_removes_the_pair_and_answers_with_counts(robot: Robot) -> None:
    robot.say("t1", "안녕")
    [(pair_id,)] = robot.rows("SELECT pair_id FROM pairs")
    msg = ForgetMsg(request_id="f1", scope="pair", id=pair_id)
    robot.app.take_forget(msg, robot.arrival("memory/forget"))
    [result] = robot.wire.on("memory/forget/result")
    assert result["request_id"] == "f1" and result["removed"]["pairs"] == 1
    assert robot.rows("SELECT count(*) FROM pairs") == [(0,)]


def test_a_unit_the_db_refuses_changes_nothing(robot: Robot) -> None:
    robot.app.memory.db.execute("PRAGMA query_only=1")
    with pytest.raises(StorageUnavailable):
        robot.push()
    robot.app.memory.db.execute("PRAGMA query_only=0")
    assert robot.app.tm.active_ids() == []  # the board matches the disk again
    assert robot.wire.sent == []
    robot.push()  # and the same input goes through once the DB takes writes
    assert robot.app.tm.active_ids() == ["wf-1"]


def test_without_a_service_a_cancel_settles_and_keeps_its_report_for_the_replay(
    tmp_path: Path,
) -> None:
    robot = Robot(tmp_path, live=False)
    robot.push()
    answer = robot.app.admin("workflow.cancel", {"workflow_id": "wf-1"})
    assert answer == {"ok": True, "result": {"cancelled": ["wf-1"]}}
    [(payload,)] = robot.rows("SELECT payload FROM sync_outbox WHERE kind = 'task_terminal'")
    assert json.loads(payload)["event"]["status"] == "WORKFLOW_CANCELLED"
    assert robot.app.memory.state("active_workflow_id") == ""
    asyncio.run(robot.app.close())


def test_a_terminal_report_the_cloud_does_not_take_goes_to_the_sync_outbox(
    tmp_path: Path,
) -> None:
    robot = Robot(tmp_path, taskmanager={"events_deadline_s": 0.2})

    async def go() -> None:
        reporter = asyncio.create_task(robot.app.run_reporter(robot.app.door))
        robot.cloud.down = True
        robot.push()
        robot.app.take_pui(PuiEventMsg(event_id="e1", kind="cancel"), robot.arrival("pui/event"))
        for _ in range(200):
            if robot.rows("SELECT count(*) FROM sync_outbox WHERE kind = 'task_terminal'")[0][0]:
                break
            await asyncio.sleep(0.01)
        reporter.cancel()

    asyncio.run(go())
    [(payload,)] = robot.rows("SELECT payload FROM sync_outbox WHERE kind = 'task_terminal'")
    assert json.loads(payload)["event"] == {
        "status": "WORKFLOW_CANCELLED",
        "reason": "pui",
        "evidence": {"cancelled_by_pui": True},
    }
    asyncio.run(robot.app.close())


def test_recover_answers_interrupted_turns_and_resends_owed_commands(tmp_path: Path) -> None:
    robot = Robot(tmp_path)
    asyncio.run(robot.app.close())
    robot.app = robot.open(attach=False)  # the broker never saw what this run owed
    robot.push()
    robot.push(PURIFIER)
    with robot.app.unit():
        robot.app.memory.record_utterance(turn_id="t1", requested_session=None, text="안녕")
    asyncio.run(robot.app.close())
    robot.app = robot.open(attach=False)  # as the runtime starts: recover, then the broker
    recovered = robot.app.recover()
    assert recovered == {
        "reports_kept": 0,
        "interrupted_turns": 1,
        "active_workflows": 2,
        "commands_resent": 1,
    }
    robot.app.attach(robot.wire)
    robot.app.outbox.flush()
    [command] = robot.wire.on("task/command/air_purifier")
    assert command["task_id"] == "wf-ap:s" and command["attempt"] == 2
    # a move (on_restart: fail) is never sent again at start (SPEC 4.8): its agent's status
    # ends it, else its deadlines do
    assert robot.wire.on("task/command/mobility") == []
    trace = robot.app.tm.store.timeline("wf-1")
    assert [e["why"] for e in trace if e["kind"] == "not_redispatched"] == ["on_restart"]
    [answer] = robot.wire.on("turn/response")
    assert answer["status"] == "error" and answer["error"].startswith("interrupted")
    asyncio.run(robot.app.close())


def test_a_lost_broker_session_sends_every_active_command_again(robot: Robot) -> None:
    robot.push()
    robot.callback(MOVE, 1, "RUNNING")
    robot.app.session_lost()
    commands = robot.wire.on("task/command/mobility")
    assert [c["attempt"] for c in commands] == [1, 2]
    trace = robot.app.tm.store.timeline("wf-1")
    assert [e["attempt"] for e in trace if e["kind"] == "redispatched"] == [2]
