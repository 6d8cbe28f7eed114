"""Agents' presence across a restart of the runtime (SPEC §4.8, issue 32's attacks), through
the real process: Mosquitto, `a2a-edge run`, and device agents built on `a2a_agent`."""

from __future__ import annotations

import json
import time

import httpx

from sim.broker import Mosquitto, free_port
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, workflow_event
from tests.e2e.test_agent_presence import AgentProc, agents_row, one_step, status_of
from tests.e2e.traces import trace_details

EVENTS = f"{ROOT}/workflow/event"
STEP_OUTCOMES = ("DISPATCHED", "FAILED", "TIMEOUT")


def test_an_agent_offline_before_the_restart_is_still_offline_after_it(
    broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    """An agent `offline` when the runtime stopped stays offline in the next run until it says
    otherwise, also when the broker no longer holds its retained status: a step for it fails at
    once `agent_offline`, as `a2a-edge status` (the kept row) says. On main the second run
    dispatched it: `display.clear` and `speaker.say` waited their ack window (the say then held
    `voice` behind an unconfirmed cancel)."""
    runtime = runtime_factory()
    for cap in ("display", "speaker"):
        status = {"state": "offline", "boot_id": f"{cap}-b2"}
        probe.publish(f"{ROOT}/agent/{cap}/status", status, retain=True)
        eventually(lambda cap=cap: agents_row(state_rows, cap) == ("offline", f"{cap}-b2", 1))
    probe.publish(f"{ROOT}/workflow/request", one_step("wf-c1", "display", "clear"))
    assert workflow_event(probe, "wf-c1", "FAILED")["reason"] == "agent_offline"
    runtime.terminate()
    for cap in ("display", "speaker"):  # the broker lost them (restarted without its store)
        probe.publish(f"{ROOT}/agent/{cap}/status", b"", retain=True)
    runtime_factory()
    for wf, cap, op, args in (
        ("wf-c2", "display", "clear", {}),
        ("wf-s2", "speaker", "say", {"text": "안녕"}),
    ):
        sent = time.monotonic()
        probe.publish(f"{ROOT}/workflow/request", one_step(wf, cap, op, args=args))
        first = probe.wait_for(  # the step's first event: FAILED at once, not DISPATCHED
            EVENTS,
            lambda b, wf=wf: b["workflow_id"] == wf and b["status"] in STEP_OUTCOMES,
        )
        assert (first["status"], first["reason"]) == ("FAILED", "agent_offline"), first
        assert time.monotonic() - sent < 2.0
    assert not [m for m in probe.messages(f"{ROOT}/task/command/speaker")]


def test_a_move_in_flight_at_a_power_cut_with_an_empty_broker_is_never_sent_again(
    broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    """The power goes mid-move: broker, runtime and agent SIGKILLed; the broker comes back
    empty (no store: no session, no retained status), then the runtime, the agent 3 s later.
    The move (on_restart: fail) is not sent again at start: it ends `agent_restarted` when the
    agent's new boot says it holds nothing. On main the start re-sent it (attempt 2)."""
    runtime = runtime_factory()
    agent = AgentProc(broker.port, "mobility", "progress")
    status_of(probe, "mobility", "online", agent.boot_id)
    move = one_step("wf-pc", "mobility", "move_to_room", args={"room": "안방"}, timeout_s=120)
    probe.publish(f"{ROOT}/workflow/request", move)
    workflow_event(probe, "wf-pc", "PROGRESS")
    broker.kill()
    runtime.kill()
    agent.kill()
    for stored in broker.workdir.glob("*.db"):  # the broker's store is gone with the power
        stored.unlink()
    connects = probe.connects
    broker.start()
    probe.wait_connected(connects + 1, timeout_s=20)
    runtime_factory()
    time.sleep(3.0)  # the scenario: the agent boots 3 s after the runtime (no wait on a result)
    again = AgentProc(broker.port, "mobility", "progress")
    ended = workflow_event(probe, "wf-pc", "WORKFLOW_FAILED", timeout_s=15)
    assert ended["reason"] == "agent_restarted", ended
    resent = [c for c in probe.messages(f"{ROOT}/task/command/mobility") if c["attempt"] > 1]
    assert resent == [], resent
    assert again.commands("wf-pc:s") == []
    detail = trace_details(state_rows, "wf-pc", "redispatched")
    assert detail == [], detail
    again.stop()


def settled_after(
    probe: MqttProbe, state_rows: StateRows, mark: str, cap: str = "toaster", known: int = 0
) -> None:
    """Every input sent before this returns has been taken: a status sent last is in the
    `agents` table (the intake takes inputs in order)."""
    probe.publish(f"{ROOT}/agent/{cap}/status", {"state": "online", "boot_id": mark})
    eventually(lambda: agents_row(state_rows, cap) == ("online", mark, known))


def test_a_stale_offline_changes_nothing_and_a_task_ended_that_the_agent_still_holds_is_cancelled(
    broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    """An `offline` naming a boot that is not the agent's current one (a stale will, a forged
    status) ends nothing; on main it failed the running move `agent_lost` while the body kept
    moving. A task the runtime ended that an `online` status still lists (the agent's will
    fired on a network blip, its process lived) gets a `task/cancel`, confirmed the 4.2 way."""
    runtime_factory()
    agent = AgentProc(broker.port, "mobility")
    status_of(probe, "mobility", "online", agent.boot_id)
    move = one_step("wf-st", "mobility", "move_to_room", args={"room": "안방"}, timeout_s=120)
    probe.publish(f"{ROOT}/workflow/request", move)
    workflow_event(probe, "wf-st", "RUNNING")
    stale = {"state": "offline", "boot_id": "boot-very-old"}
    probe.publish(f"{ROOT}/agent/mobility/status", stale)
    settled_after(probe, state_rows, "t-1")
    ended = [e for e in probe.messages(EVENTS) if e["workflow_id"] == "wf-st"]
    assert [e["status"] for e in ended if e["status"] in ("FAILED", "WORKFLOW_FAILED")] == []
    assert agents_row(state_rows, "mobility") == ("online", agent.boot_id, 1)
    # the agent's will fires (its status connection dropped) but the process lives on
    probe.publish(f"{ROOT}/agent/mobility/status", {"state": "offline", "boot_id": agent.boot_id})
    assert workflow_event(probe, "wf-st", "FAILED")["reason"] == "agent_lost"
    held = {"state": "online", "boot_id": agent.boot_id, "tasks": ["wf-st:s"]}
    probe.publish(f"{ROOT}/agent/mobility/status", held)  # it reconnects: still moving
    cancel = probe.wait_for(f"{ROOT}/task/cancel/mobility", lambda b: b["task_id"] == "wf-st:s")
    assert cancel["reason"] == "supervisor", cancel
    eventually(lambda: [x for x in agent.lines if x.startswith("cancelled wf-st:s")])
    confirmed = eventually(lambda: trace_details(state_rows, "wf-st", "cancel_confirmed"))
    assert confirmed
    agent.stop()


def test_statuses_of_unknown_capabilities_and_their_log_lines_are_bounded(
    broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    """At most 32 capabilities the catalog does not have are kept (the rest refused
    `too_many_agents`, with `ref`), `a2a_agent_online` stays within the label bound, and a
    flood of a known agent's flips writes a bounded number of lines. On main 4,547 rows and
    as many series were kept, and each change was an INFO line (run.log reached 10 MB)."""
    port = free_port()
    runtime = runtime_factory(metrics={"enabled": True, "port": port})
    flooder = MqttProbe(broker.port, [], root=ROOT)
    try:
        for n in range(40):
            body = json.dumps({"state": "online", "boot_id": f"u-{n}"}).encode()
            flooder.client.publish(f"{ROOT}/agent/gadget-{n:02d}/status", body, qos=1)
        for n in range(400):
            state = "online" if n % 2 else "offline"
            body = json.dumps({"state": state, "boot_id": f"d-{n}"}).encode()
            last = flooder.client.publish(f"{ROOT}/agent/display/status", body, qos=1)
        last.wait_for_publish(30)  # QoS 1 in order: every one before it went too
    finally:
        flooder.close()
    settled_after(probe, state_rows, "after-flood", "vital_app", 1)
    assert agents_row(state_rows, "display") == ("online", "d-399", 1)
    [(unknown,)] = state_rows("SELECT count(*) FROM agents WHERE known = 0")
    assert unknown == 32, unknown
    refused = [
        e for e in probe.messages(f"{ROOT}/runtime/error") if e["error"] == "too_many_agents"
    ]
    assert len(refused) == 8 and refused[0]["ref"]["boot_id"].startswith("u-"), refused[:1]
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    series = [x for x in metrics.splitlines() if x.startswith("a2a_agent_online{")]
    assert 0 < len(series) <= 64, len(series)
    lines = [x for x in runtime.log().splitlines() if " INFO edge.app.presence_inputs: " in x]
    assert len(lines) <= 12, len(lines)
