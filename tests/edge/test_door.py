"""The one door (edge/store/door.py): every kind of input the executor takes is held while the state
DB refuses writes (`PRAGMA query_only`) and applied, in order, once it takes them again — in
process, against a real SQLite file, with a recording channel and the cloud as a MockTransport.

Before the door (main 59f29e6): a deadline that fell due on a refusing DB ended the timer task
(never fired again until a restart); a reconnect's session-lost handling that met one skipped the
redispatch, the outbox flush and the status update; a batch that failed outside its handlers
was left unacknowledged."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from edge.channel.mqtt import Inbound
from edge.channel.topics import TurnRequestMsg
from edge.host.notify import Notifier
from edge.runtime.executor import Runtime
from edge.store.door import Door, Outcome
from tests.edge.test_app import ROOT, Robot
from tests.taskmanager.helpers import MOVE_PURIFY

MOVE = "wf-1:step_move"


class Channel:
    """Records what the executor publishes and acknowledges."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.acked: list[int] = []

    def publish(self, topic: str, payload: bytes, **_kw: Any) -> int:
        self.sent.append((topic, json.loads(payload)))
        return len(self.sent)

    def ack(self, message: Inbound) -> None:
        self.acked.append(message.mid)

    def on(self, suffix: str) -> list[Any]:
        return [body for topic, body in self.sent if topic == f"{ROOT}/{suffix}"]


class Stage:
    def __init__(self, tmp_path: Path) -> None:
        self.robot = Robot(tmp_path)
        self.app = self.robot.app
        self.door: Door = self.app.door
        self.channel = Channel()
        self.config = tmp_path / "config.toml"
        self.config.write_text(
            f'device_id = "robot-app"\nstate_dir = "{tmp_path / "state"}"\n', encoding="utf-8"
        )
        self.runtime = Runtime(
            app=self.app,
            door=self.door,
            channel=self.channel,  # type: ignore[arg-type]
            notifier=Notifier({}),
            settings=self.robot.settings,
            config_path=self.config,
        )

    def refuse_writes(self, on: bool) -> None:
        self.app.memory.db.execute(f"PRAGMA query_only={int(on)}")

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return self.robot.rows(sql)

    def commands(self, task_id: str) -> list[Any]:
        wire = self.robot.wire.sent + self.channel.sent
        return [b for t, b in wire if "/task/command/" in t and b.get("task_id") == task_id]


@pytest.fixture
def stage(tmp_path: Path) -> Iterator[Stage]:
    stage = Stage(tmp_path)
    yield stage
    stage.refuse_writes(False)
    asyncio.run(stage.app.close())


def message(stage: Stage) -> Callable[[], Any]:
    body = json.dumps({**MOVE_PURIFY, "workflow_id": "wf-msg"}).encode()
    inbound = Inbound(f"{ROOT}/workflow/request", body, 1, 7, 1, False)
    stage.runtime._intake.take([inbound])
    assert stage.channel.acked == []  # held: not acknowledged, not applied
    return lambda: stage.channel.acked == [7] and "wf-msg" in stage.app.tm.active_ids()


def deadline(stage: Stage) -> Awaitable[Any]:
    stage.refuse_writes(False)
    stage.robot.push()  # the move is dispatched; nobody answers it
    stage.refuse_writes(True)
    stage.robot.clock.advance(600)
    return stage.runtime.take_deadline()


def deadline_applied(stage: Stage) -> bool:
    cancels = [b for t, b in stage.robot.wire.sent if t == f"{ROOT}/task/cancel/mobility"]
    return "TIMEOUT" in stage.robot.events(MOVE) and [c["task_id"] for c in cancels] == [MOVE]


def connection(stage: Stage) -> Callable[[], Any]:
    stage.refuse_writes(False)
    stage.robot.push()
    stage.refuse_writes(True)
    before = len(stage.commands(MOVE))
    stage.runtime.take_connection(False)
    # whatever the DB says: the status is published and what was owed is flushed at once
    assert [b["state"] for b in stage.channel.on("runtime/status")] == ["online"]
    assert len(stage.commands(MOVE)) == before  # the redispatch waits for the DB
    return lambda: [c["attempt"] for c in stage.commands(MOVE)][-1] == 2


def puback(stage: Stage) -> Callable[[], Any]:
    stage.refuse_writes(False)
    stage.robot.push()  # a command row goes to the wire
    [(mid,)] = stage.rows("SELECT count(*) FROM mqtt_outbox")
    assert mid >= 1
    for n in range(1, len(stage.robot.wire.sent) + 1):
        stage.app.on_published(n)
    stage.refuse_writes(True)
    stage.runtime._reap()
    assert stage.rows("SELECT count(*) FROM mqtt_outbox")[0][0] >= 1
    return lambda: stage.rows("SELECT count(*) FROM mqtt_outbox") == [(0,)]


def reload(stage: Stage) -> Callable[[], Any]:
    with stage.config.open("a", encoding="utf-8") as out:
        out.write('[privacy]\nconsented_categories = ["health"]\n')
    stage.runtime.take_reload()
    assert "category:health" not in json.dumps(stage.app.consent.grants())
    return lambda: "category:health" in json.dumps(stage.app.consent.grants())


def sweep(stage: Stage) -> Awaitable[Any]:
    stage.refuse_writes(False)
    stage.robot.admin("old-1", "sync.replay")  # a dedupe mark, soon past its keep
    stage.refuse_writes(True)
    keep = stage.robot.settings.mqtt.dedupe_keep_days
    stage.robot.clock.advance((keep + 1) * 86400)
    return stage.runtime.take_sweep()


def turn_answer(stage: Stage) -> Awaitable[Any]:
    async def go() -> None:
        stage.refuse_writes(False)  # the utterance is committed; its answer is not

        def refuse_when_asked(_request: Any) -> None:
            stage.refuse_writes(True)  # the cloud answers; the DB refuses the answer's unit

        stage.robot.cloud.on_turn = refuse_when_asked
        msg = TurnRequestMsg(turn_id="t-door", recognized_text="안녕")
        stage.app.take_turn(msg, stage.robot.arrival("turn/request"))
        await asyncio.gather(*stage.app.turns_in_flight)

    return go()


def report_answer(stage: Stage) -> Awaitable[Any]:
    async def go() -> None:
        stage.refuse_writes(False)
        stage.robot.cloud.down = True  # the terminal report is not taken: kept for the replay
        reporter = asyncio.create_task(stage.app.run_reporter(stage.door))
        stage.robot.push()
        stage.robot.callback(MOVE, 1, "FAILED", reason="blocked")
        stage.refuse_writes(True)
        await held(stage)
        stage.refuse_writes(False)
        stage.door.retry_now()
        reporter.cancel()

    return go()


async def held(stage: Stage, timeout_s: float = 5.0) -> None:
    async def wait() -> None:
        while not stage.door.held:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait(), timeout_s)


SYNC_CASES: dict[str, Callable[[Stage], Callable[[], Any]]] = {
    "message": message,
    "connection": connection,
    "puback": puback,
    "reload": reload,
}


@pytest.mark.parametrize("kind", sorted(SYNC_CASES))
def test_an_input_the_db_refuses_is_held_and_applied_once_it_takes_writes(
    stage: Stage, kind: str
) -> None:
    stage.refuse_writes(True)

    async def go() -> None:
        applied = SYNC_CASES[kind](stage)
        assert stage.door.held >= 1 or stage.runtime._intake.held >= 1
        assert not applied()
        stage.refuse_writes(False)
        stage.door.retry_now()
        assert applied()
        assert stage.door.held == 0 and stage.runtime._intake.held == 0

    asyncio.run(go())


ASYNC_CASES: dict[str, tuple[Callable[[Stage], Awaitable[Any]], Callable[[Stage], bool]]] = {
    "deadline": (deadline, deadline_applied),
    "sweep": (sweep, lambda s: s.rows("SELECT count(*) FROM inbox_seen") == [(0,)]),
    "turn answer": (
        turn_answer,
        lambda s: [r["status"] for r in s.robot.wire.on("turn/response")] == ["ok"],
    ),
}


@pytest.mark.parametrize("kind", sorted(ASYNC_CASES))
def test_an_awaited_input_waits_for_the_db_and_then_goes_through(stage: Stage, kind: str) -> None:
    start, applied = ASYNC_CASES[kind]
    stage.refuse_writes(True)

    async def go() -> None:
        task = asyncio.ensure_future(start(stage))
        await held(stage)  # the loop turns: the input is held, not lost
        assert not task.done() and not applied(stage)
        stage.refuse_writes(False)
        stage.door.retry_now()
        await asyncio.wait_for(task, 5)
        assert applied(stage)

    asyncio.run(go())


def test_a_report_answer_the_db_refuses_is_kept_once_it_takes_writes(stage: Stage) -> None:
    asyncio.run(report_answer(stage))
    rows = stage.rows("SELECT count(*) FROM sync_outbox WHERE kind = 'task_terminal'")
    assert rows == [(1,)]


def test_a_batch_that_fails_outside_its_handlers_is_taken_again_one_by_one(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the batch's messages were left unacknowledged (SPEC §2.4)."""
    calls = {"n": 0}
    reap = stage.app.reap_rows

    def failing() -> None:
        calls["n"] += 1
        raise RuntimeError("a bug outside any handler")

    monkeypatch.setattr(stage.app, "reap_rows", failing)
    batch = [
        Inbound(
            f"{ROOT}/workflow/request",
            json.dumps({**MOVE_PURIFY, "workflow_id": f"wf-b{n}"}).encode(),
            1,
            n,
            1,
            False,
        )
        for n in range(1, 4)
    ]
    stage.runtime._intake.take(batch)
    assert calls["n"] == 1
    assert sorted(stage.channel.acked) == [1, 2, 3]  # each has its outcome, acknowledged
    assert sorted(stage.app.tm.active_ids()) == ["wf-b1", "wf-b2", "wf-b3"]  # applied once
    assert stage.door.failures["inbound batch"] == 1
    monkeypatch.setattr(stage.app, "reap_rows", reap)


def test_the_app_runs_inside_the_unit_the_door_opened(stage: Stage) -> None:
    """App methods join the executor's unit: one transaction per input, settled once."""
    seen: list[object] = []

    def twice() -> None:
        for _ in range(2):
            with stage.app.unit() as result:
                seen.append(result)

    assert stage.door.attempt("test", twice).done
    assert len(seen) == 2 and seen[0] is seen[1]
    with stage.app.unit() as alone:  # without the executor (the CLI): a unit of its own
        assert alone is not seen[0]


def test_a_deadline_whose_tick_fails_with_a_bug_does_not_end_the_deadline_loop(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline loop outlives a failing tick (the door counts it) and fires it later."""
    import edge.runtime.executor as executor

    monkeypatch.setattr(executor, "FAILED_TICK_RETRY_S", 0.05)
    stage.robot.push()
    stage.robot.clock.advance(600)
    tick, calls = stage.app.tick, {"n": 0}

    def failing_once() -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug in a tick")
        tick()

    monkeypatch.setattr(stage.app, "tick", failing_once)

    async def go() -> None:
        loop = asyncio.create_task(stage.runtime._deadlines())
        try:
            await asyncio.wait_for(until(lambda: deadline_applied(stage)), 5)
        finally:
            loop.cancel()

    asyncio.run(go())
    assert calls["n"] >= 2 and stage.door.failures["deadline"] == 1


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)


def test_a_damaged_db_behind_a_packages_own_error_is_the_stop_not_a_bug(stage: Stage) -> None:
    """Found by an outside attack: a read of a damaged page inside a handler, raised as the
    cache's own error, was taken for a handler's bug (refused internal_error, dead-lettered),
    and after the stop the log said every held message had been applied."""
    stops: list[str] = []
    stage.door.on_fatal = stops.append

    def read_damaged() -> None:
        try:
            raise sqlite3.DatabaseError("database disk image is malformed")
        except sqlite3.DatabaseError as exc:
            raise RuntimeError("cache read failed") from exc

    attempt = stage.door.attempt("inbound message", read_damaged)
    assert attempt.outcome is Outcome.FATAL and stops and stage.door.closed
    assert stage.door.failures["inbound message"] == 0
