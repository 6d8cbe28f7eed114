"""The consent register (SPEC §5.6) in-process: the register on a real SQLite file with an
injected clock, and the app's consent inputs with a recording wire."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from edge.channel.topics import ConsentRequestMsg
from edge.store.consent import ConsentRegister
from edge.store.schema import MIGRATIONS
from tests.edge.test_app import Robot
from tests.taskmanager.helpers import T0

VITAL = {
    "workflow_id": "wf-v",
    "steps": [{"step_id": "v", "capability_id": "vital_app", "operation_id": "start_session"}],
}


def test_a_grant_is_held_until_it_expires_and_the_audit_is_append_only(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    register = ConsentRegister(db=db, clock=clock, capabilities=["speaker"])
    with db.conn:
        register.grant("capability:vital_app", 60, "ui", "c-1")
        register.grant("category:health", None, "cli", None)
    assert register.capabilities() == {"vital_app", "speaker"}
    assert register.categories() == {"health"}
    assert register.next_expiry() is not None
    clock.advance(60)  # at expires_at it is no longer held, noticed or not
    assert register.capabilities() == {"speaker"}
    with db.conn:
        assert [g.scope for g in register.expire()] == ["capability:vital_app"]
        assert register.expire() == []
        assert register.revoke("category:health", "ui", "c-2")
        assert not register.revoke("category:health", "ui", "c-3")  # nothing held: no row
    assert register.categories() == frozenset() and register.next_expiry() is None
    audit = [(a["action"], a["scope"]) for a in reversed(register.audit())]
    assert audit == [
        ("grant", "capability:vital_app"),
        ("grant", "category:health"),
        ("expire", "capability:vital_app"),
        ("revoke", "category:health"),
    ]
    for sql in ("UPDATE consent_audit SET scope = 'x'", "DELETE FROM consent_audit"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"), db.conn:
            db.execute(sql)
    assert len(register.audit()) == 4
    assert register.held()[0].source == "config"  # standing grants are listed, held
    db.close()


@pytest.fixture
def robot(tmp_path: Path) -> Iterator[Robot]:
    robot = Robot(tmp_path)
    yield robot
    asyncio.run(robot.app.close())


def ask(robot: Robot, request_id: str, action: str, scope: str, **extra: Any) -> Any:
    msg = ConsentRequestMsg(request_id=request_id, action=action, scope=scope, **extra)  # type: ignore[arg-type]
    robot.app.take_consent(msg, robot.arrival("consent/request"))
    return robot.wire.on("consent/result")[-1]


def test_a_grant_lets_the_vital_step_run_and_its_expiry_cancels_it(robot: Robot) -> None:
    robot.push(VITAL)
    assert robot.events() == ["WORKFLOW_REJECTED"]
    assert robot.wire.on("workflow/event")[0]["reason"] == "consent_required"
    answer = ask(robot, "c-1", "grant", "capability:vital_app", ttl_s=30)
    assert answer["ok"] is True and answer["request_id"] == "c-1"
    assert [g["scope"] for g in answer["grants"]] == ["capability:vital_app"]
    assert answer["grants"][0]["source"] == "ui" and "expires_at" in answer["grants"][0]
    robot.push({**VITAL, "workflow_id": "wf-v2"})
    [command] = robot.wire.on("task/command/vital_app")
    robot.callback(command["task_id"], 1, "RUNNING")
    robot.clock.advance(31)
    robot.app.tick()  # the expiry is noticed: it ends like a revoke
    [cancel] = robot.wire.on("task/cancel/vital_app")
    assert cancel == {"task_id": "wf-v2:v", "workflow_id": "wf-v2", "reason": "consent_revoked"}
    assert robot.app.tm.active_ids() == []
    kinds = robot.rows(
        "SELECT json_extract(payload, '$.action') FROM sync_outbox WHERE kind = 'consent'"
        " ORDER BY write_id"
    )
    assert kinds == [("grant",), ("expire",)]


def test_a_repeat_is_answered_the_same_and_applied_once(robot: Robot) -> None:
    first = ask(robot, "c-1", "grant", "category:Health")
    robot.clock.advance(5)
    again = ask(robot, "c-1", "grant", "category:Health")
    assert again == first and first["grants"][0]["scope"] == "category:health"
    reused = ask(robot, "c-1", "revoke", "category:health")  # the id again, other content
    assert reused["ok"] is False and reused["error"] == "duplicate_request_id"
    assert robot.wire.on("runtime/error")[-1]["ref"] == {"request_id": "c-1"}
    assert [g["scope"] for g in reused["grants"]] == ["category:health"]  # still held
    assert robot.rows("SELECT count(*) FROM consent_audit") == [(1,)]


def test_a_category_is_in_the_snapshot_only_while_a_grant_is_held(robot: Robot) -> None:
    with robot.app.unit():
        robot.app.memory.profile.put_confirmed(
            {"key": "blood_pressure", "value": "high", "category": "health"}
        )

    def keys() -> list[str]:
        items = robot.app.memory.snapshot(None)["long_term"]["profile_items"]
        return [i["key"] for i in items]

    assert keys() == []
    ask(robot, "c-1", "grant", "category:health")
    assert keys() == ["blood_pressure"]
    ask(robot, "c-2", "revoke", "category:health")
    assert keys() == []


def test_refused_by_the_register_answered_and_nothing_changes(robot: Robot) -> None:
    answer = ask(robot, "c-1", "grant", "capability:nope")
    assert answer["ok"] is False and answer["error"] == "unknown_capability"
    [refused] = robot.wire.on("runtime/error")
    assert refused["error"] == "unknown_capability" and refused["ref"] == {"request_id": "c-1"}
    assert robot.rows("SELECT count(*) FROM consent_audit") == [(0,)]
    assert robot.rows("SELECT count(*) FROM inbox_seen") == [(0,)]


def test_admin_commands_take_the_same_rules(robot: Robot) -> None:
    done = robot.admin("a-1", "consent.grant", scope="capability:vital_app", ttl_s=600)
    assert done["ok"] is True
    assert done["result"]["grants"][0]["source"] == "cli"
    bad = robot.admin("a-2", "consent.grant", scope="category:", ttl_s=600)
    assert bad["ok"] is False and "scope" in bad["error"]
    bad = robot.admin("a-3", "consent.revoke", scope="capability:vital_app", action="grant")
    assert bad["ok"] is True  # args cannot change the command's action
    assert robot.rows("SELECT action FROM consent_audit ORDER BY id") == [("grant",), ("revoke",)]


def test_a_standing_grant_dropped_by_a_reload_ends_like_a_revoke(tmp_path: Path) -> None:
    robot = Robot(tmp_path, privacy={"consented_capabilities": ["vital_app"]})
    try:
        assert ask(robot, "c-1", "revoke", "capability:vital_app")["error"] == "standing_in_config"
        robot.push(VITAL)
        assert robot.wire.on("task/command/vital_app")
        robot.app.reload_consent(["health"], ["vital_app"])  # still standing: nothing ends
        assert robot.app.tm.active_ids() == ["wf-v"]
        robot.app.reload_consent([], [])
        [cancel] = robot.wire.on("task/cancel/vital_app")
        assert cancel["reason"] == "consent_revoked" and robot.app.tm.active_ids() == []
    finally:
        asyncio.run(robot.app.close())
