"""Agents' presence across a restart of the runtime (SPEC §4.8, issue 32's attacks), through
the real process: Mosquitto, `a2a-edge run`, and device agents built on `a2a_agent`."""

from __future__ import annotations

import time

from sim.broker import Mosquitto
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, workflow_event
from tests.e2e.test_agent_presence import agents_row, one_step

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
