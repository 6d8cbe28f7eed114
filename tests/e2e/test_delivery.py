"""Outcomes an outside attack found wrong (SPEC §2, §2.4): a CLI command reported failed and
applied later, a held message refused too, reused request ids left unanswered, a refusal's
`ref` with a false `seq`, a callback's `progress` given as a string."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from a2a_common.clock import iso
from sim.broker import free_port
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, fill, refusal
from tests.e2e.test_consent import vital
from tests.edge.test_metrics_runtime import scrape

ADMIN, ADMIN_OUT = f"{ROOT}/admin/request", f"{ROOT}/admin/response"
FORGET, FORGET_OUT = f"{ROOT}/memory/forget", f"{ROOT}/memory/forget/result"
ERRORS = f"{ROOT}/runtime/error"


def answers(probe: MqttProbe, topic: str, request_id: str) -> list[Any]:
    return [b for b in probe.messages(topic) if b.get("request_id") == request_id]


def test_a_cli_command_reported_failed_is_never_applied_later(
    runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    """Before: with the service stopped, `memory forget --all` said "did not answer" and exited
    1, and once the service went on the forget was applied all the same."""
    runtime = runtime_factory()
    assert probe.turn("keep-1", "안녕")["status"] == "ok"
    assert runtime.proc is not None
    config = ["--config", str(runtime.config)]
    os.kill(runtime.proc.pid, signal.SIGSTOP)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "edge", "memory", "forget", "--all", "--yes", *config],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.kill(runtime.proc.pid, signal.SIGCONT)
    assert done.returncode == 1 and "did not answer" in done.stderr
    assert probe.turn("keep-2", "고마워")["status"] == "ok"  # the service has caught up
    assert [b for b in probe.messages(ADMIN_OUT) if b.get("ok")] == []
    assert state_rows("SELECT count(*) FROM pairs") == [(2,)]
    # a request past its deadline (as a broker without MQTT 5 expiry delivers it): refused
    past = iso(datetime.now(UTC) - timedelta(seconds=30))
    grant = {"command": "consent.grant", "args": {"scope": "capability:vital_app"}}
    probe.publish(ADMIN, {"request_id": "late-1", **grant, "expires_at": past})
    refusal(probe, "expired", request_id="late-1")
    late = eventually(lambda: answers(probe, ADMIN_OUT, "late-1"))
    assert late == [{"request_id": "late-1", "ok": False, "error": "expired"}]
    for bad in (12345, "yesterday", "2026-01-01T00:00:00"):  # a number, not ISO, no zone
        probe.publish(ADMIN, {"request_id": f"bad-{bad}", **grant, "expires_at": bad})
        refusal(probe, "invalid_field", request_id=f"bad-{bad}")
    assert state_rows("SELECT count(*) FROM consent_grants") == [(0,)]
    # other tools send no deadline: applied as before; a deadline ahead: applied
    probe.publish(ADMIN, {"request_id": "tool-1", **grant})
    assert eventually(lambda: answers(probe, ADMIN_OUT, "tool-1"))[0]["ok"] is True
    ahead = iso(datetime.now(UTC) + timedelta(seconds=30))
    revoke = {"command": "consent.revoke", "args": {"scope": "capability:vital_app"}}
    probe.publish(ADMIN, {"request_id": "tool-2", **revoke, "expires_at": ahead})
    assert eventually(lambda: answers(probe, ADMIN_OUT, "tool-2"))[0]["ok"] is True


def test_a_reused_request_id_is_refused_and_answered(
    runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    """Before: `mf-d` (a pair) then `mf-d` (all), and admin `ad1` grant then `ad1` revoke,
    got no outcome at all."""
    runtime_factory()
    assert probe.turn("t-1", "안녕")["status"] == "ok"
    first = {"request_id": "mf-d", "scope": "pair", "id": "pair-nope"}
    probe.publish(FORGET, first)
    stored = eventually(lambda: answers(probe, FORGET_OUT, "mf-d"))[0]
    probe.publish(FORGET, {"request_id": "mf-d", "scope": "all"})
    refusal(probe, "duplicate_request_id", request_id="mf-d")
    reused = eventually(lambda: answers(probe, FORGET_OUT, "mf-d")[1:])[0]
    assert reused["ok"] is False and reused["error"] == "duplicate_request_id"
    probe.publish(FORGET, first)  # the same again: the stored answer again
    assert eventually(lambda: answers(probe, FORGET_OUT, "mf-d")[2:])[0] == stored
    assert state_rows("SELECT count(*) FROM pairs") == [(1,)]

    grant = {"request_id": "ad1", "command": "consent.grant"}
    probe.publish(ADMIN, {**grant, "args": {"scope": "capability:vital_app"}})
    granted = eventually(lambda: answers(probe, ADMIN_OUT, "ad1"))[0]
    assert granted["ok"] is True
    revoke = {"request_id": "ad1", "command": "consent.revoke"}
    probe.publish(ADMIN, {**revoke, "args": {"scope": "capability:vital_app"}})
    refusal(probe, "duplicate_request_id", request_id="ad1")
    again = eventually(lambda: answers(probe, ADMIN_OUT, "ad1")[1:])[0]
    assert again == {"request_id": "ad1", "ok": False, "error": "duplicate_request_id"}
    probe.publish(ADMIN, {**grant, "args": {"scope": "capability:vital_app"}})
    assert eventually(lambda: answers(probe, ADMIN_OUT, "ad1")[2:])[0] == granted
    assert state_rows("SELECT count(*) FROM consent_grants") == [(1,)]  # granted, once


def test_a_refusal_ref_and_callback_types(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    """Before: a NaN elsewhere made the ref's `seq` 0; `progress: "50"` was read as 50.0."""
    runtime_factory()
    probe.publish(
        f"{ROOT}/task/callback",
        b'{"task_id":"wf-zz:s1","seq":77,"status":"PROGRESS","progress":NaN}',
    )
    assert refusal(probe, "invalid_json", task_id="wf-zz:s1")["ref"]["seq"] == 77
    for n, progress in enumerate(["50", True, "1e2"], start=1):
        body = {"task_id": "wf-zz:s2", "seq": n, "status": "PROGRESS", "progress": progress}
        probe.publish(f"{ROOT}/task/callback", body)
        found = refusal(probe, "invalid_field", task_id="wf-zz:s2", seq=n)
        assert found["detail"].startswith("progress")
    for n, progress in enumerate([50, 12.5], start=1):  # JSON numbers pass the gate
        body = {"task_id": "wf-zz:s3", "seq": n, "status": "PROGRESS", "progress": progress}
        probe.publish(f"{ROOT}/task/callback", body)
        refusal(probe, "unknown_task", task_id="wf-zz:s3", seq=n)


def test_a_held_message_has_one_outcome_the_applied_one(
    small_disk: Path, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    """Before: with the disk full a consent request was refused `storage_unavailable` and then,
    0.7 s later, applied (`consent/result ok:true`): two outcomes for one message."""
    runtime = runtime_factory(env={"WATCHDOG_USEC": "1000000"}, storage={"max_wal_mb": 1})
    assert probe.turn("before", "안녕")["status"] == "ok"
    filler = fill(small_disk)
    grant = {"request_id": "c-full", "action": "grant", "scope": "capability:vital_app"}
    for n in range(30):
        probe.publish(
            f"{ROOT}/turn/request", {"turn_id": f"full-{n}", "recognized_text": "가" * 4000}
        )
    probe.publish(f"{ROOT}/consent/request", grant)
    probe.publish(FORGET, {"request_id": "f-full", "scope": "pair", "id": "pair-nope"})
    notify = runtime.notify
    assert notify is not None
    eventually(lambda: any(x.startswith("STATUS=degraded") for x in notify.lines), 15)
    filler.unlink()
    result = eventually(lambda: answers(probe, f"{ROOT}/consent/result", "c-full"), 30)
    assert [r["ok"] for r in result] == [True]
    eventually(lambda: answers(probe, FORGET_OUT, "f-full"), 30)
    assert [e for e in probe.messages(ERRORS) if e.get("error") == "storage_unavailable"] == []


def test_every_answer_is_counted_and_a_rejected_turn_says_nothing(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    """Before: a turn rejected for its workflows said "측정할게요" with the error twice over
    ("consent_required; consent_required"); `a2a_turns_total` counted only the planner's
    answers; a malformed PUI press got no `P/pui/result`."""
    port = free_port()
    runtime_factory(metrics={"enabled": True, "port": port})
    cloud.script_turn(
        route_family="ODL",
        assistant_text="측정할게요",
        device_workflow_requests=[vital("wf-v1"), vital("wf-v2")],
    )
    reply = probe.turn("t-vital", "혈압 재줘")
    assert (reply["status"], reply["assistant_text"]) == ("rejected", "")
    assert reply["error"] == "consent_required"
    assert probe.turn("t-ok", "안녕")["status"] == "ok"
    probe.publish(f"{ROOT}/turn/request", {"turn_id": "t-ok", "recognized_text": "안녕"})
    probe.publish(f"{ROOT}/turn/request", b'{"turn_id": "t-bad", "recognized_text": 5}')
    eventually(lambda: len(probe.messages(f"{ROOT}/turn/response")) == 4)
    _, values = scrape(port)
    assert values['a2a_turns_total{status="ok"}'] == 2  # the answer, and the repeat's again
    assert values['a2a_turns_total{status="rejected"}'] == 2
    probe.publish(f"{ROOT}/pui/event", {"event_id": "p-bad", "kind": "press"})
    refusal(probe, "invalid_field", event_id="p-bad")
    pressed = probe.wait_for(f"{ROOT}/pui/result", lambda b: b.get("event_id") == "p-bad")
    assert pressed == {
        "event_id": "p-bad",
        "status": "rejected",
        "workflow_ids": [],
        "error": "invalid_field",
    }
