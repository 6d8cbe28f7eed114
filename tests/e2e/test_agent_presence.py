"""Agents come and go (SPEC §4.8), through the real process: Mosquitto, the sim cloud, and
device agents built on `a2a_agent` in processes of their own, killed with SIGKILL (their MQTT
will says `offline`) and started again (a new `boot_id`)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from edge.config.settings import load_settings
from edge.views.console import health as console_health
from sim.broker import Mosquitto, free_port
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, refusal, workflow_event
from tests.e2e.test_cli import a2a_edge
from tests.e2e.traces import trace_details

SCRIPT = Path(__file__).with_name("presence_agent.py")
EVENTS = f"{ROOT}/workflow/event"


class AgentProc:
    """A presence_agent.py process: its printed lines, its boot, SIGKILL or SIGTERM."""

    def __init__(self, port: int, caps: str, mode: str = "hold") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(port), ROOT, caps, mode],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).parents[2],
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        served = eventually(lambda: [x for x in self.lines if x.startswith("serving ")], 20)
        self.boot_id = served[0].split()[1]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def commands(self, task_id: str) -> list[int]:
        return [int(x.split()[2]) for x in self.lines if x.startswith(f"command {task_id} ")]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        self.proc.terminate()
        assert self.proc.wait(10) == 0


def one_step(workflow_id: str, cap: str, op: str, **step: Any) -> dict[str, Any]:
    return {
        "workflow_id": workflow_id,
        "steps": [{"step_id": "s", "capability_id": cap, "operation_id": op, **step}],
    }


def status_of(probe: MqttProbe, cap: str, state: str, boot_id: str) -> Any:
    if boot_id == "none":  # a helper without presence (main before SPEC 4.8): nothing to wait for
        return None
    return probe.wait_for(
        f"{ROOT}/agent/{cap}/status",
        lambda b: b.get("state") == state and b.get("boot_id") == boot_id,
    )


def agents_row(state_rows: StateRows, cap: str) -> tuple[Any, ...] | None:
    rows = state_rows("SELECT state, boot_id, known FROM agents WHERE capability_id = ?", (cap,))
    return rows[0] if rows else None


def test_a_killed_agent_ends_its_running_move_within_two_seconds(
    broker: Mosquitto,
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    cloud: SimCloud,
    state_rows: StateRows,
) -> None:
    """On main the step stayed RUNNING until its 120 s timeout."""
    runtime_factory()
    agent = AgentProc(broker.port, "mobility")
    status_of(probe, "mobility", "online", agent.boot_id)
    move = one_step("wf-k", "mobility", "move_to_room", args={"room": "안방"}, timeout_s=120)
    probe.publish(f"{ROOT}/workflow/request", move)
    workflow_event(probe, "wf-k", "RUNNING")
    killed = time.monotonic()
    agent.kill()
    ended = workflow_event(probe, "wf-k", "FAILED")
    took = time.monotonic() - killed
    assert ended["reason"] == "agent_lost" and took < 2.0, (ended, took)
    reported = eventually(
        lambda: [
            r["body"]
            for r in cloud.requests("/v1/a2a/workflow/events")
            if r["body"]["event"].get("reason") == "agent_lost"
        ]
    )
    assert reported[0]["decision_requested"] is True
    workflow_event(probe, "wf-k", "WORKFLOW_FAILED")
    trace = [json.loads(d) for d in trace_details(state_rows, "wf-k", "presence")]
    assert trace and trace[0]["state"] == "offline" and trace[0]["outcome"] == "failed"
    assert trace[0]["was_boot"] == agent.boot_id


def test_a_step_for_an_agent_known_offline_fails_at_once(
    broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    """On main it waited its ack window (5 s) before anything said so."""
    runtime_factory()
    agent = AgentProc(broker.port, "mobility")
    agent.stop()  # a clean stop says `offline` itself
    status_of(probe, "mobility", "offline", agent.boot_id)
    if agent.boot_id != "none":
        eventually(lambda: agents_row(state_rows, "mobility") == ("offline", agent.boot_id, 1))
    sent = time.monotonic()
    probe.publish(f"{ROOT}/workflow/request", one_step("wf-o", "mobility", "return_to_dock"))
    ended = workflow_event(probe, "wf-o", "FAILED")
    assert ended["reason"] == "agent_offline"
    assert time.monotonic() - sent < 2.0


def test_a_restarted_agent_gets_a_resend_of_a_kept_task_and_completes_it(
    broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    """air_purifier.start: on_agent_lost wait, on_restart resend (the shipped catalog)."""
    runtime_factory()
    agent = AgentProc(broker.port, "air_purifier")
    status_of(probe, "air_purifier", "online", agent.boot_id)
    request = one_step("wf-r", "air_purifier", "start", args={"mode": "auto"}, timeout_s=60)
    probe.publish(f"{ROOT}/workflow/request", request)
    workflow_event(probe, "wf-r", "RUNNING")
    agent.kill()
    status_of(probe, "air_purifier", "offline", agent.boot_id)
    again = AgentProc(broker.port, "air_purifier", "complete")
    assert again.boot_id != agent.boot_id
    eventually(lambda: again.commands("wf-r:s") == [2])  # same task_id, attempt + 1
    workflow_event(probe, "wf-r", "WORKFLOW_COMPLETED")
    again.stop()


def test_a_power_cut_mid_move_is_never_resumed_blindly(
    broker: Mosquitto,
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    cloud: SimCloud,
    state_rows: StateRows,
) -> None:
    """SIGKILL the runtime and the agent mid-move, start both again. On main the move was
    re-armed and waited for a callback that never came (RUNNING until its timeout)."""
    runtime = runtime_factory()
    agent = AgentProc(broker.port, "mobility")
    status_of(probe, "mobility", "online", agent.boot_id)
    move = one_step("wf-p", "mobility", "move_to_room", args={"room": "안방"}, timeout_s=120)
    probe.publish(f"{ROOT}/workflow/request", move)
    workflow_event(probe, "wf-p", "RUNNING")
    runtime.kill()
    agent.kill()
    again = AgentProc(broker.port, "mobility")  # the robot boots: its agent, then the runtime
    status_of(probe, "mobility", "online", again.boot_id)
    restarted = time.monotonic()
    runtime_factory()
    ended = workflow_event(probe, "wf-p", "WORKFLOW_FAILED", timeout_s=15)
    settled = time.monotonic() - restarted
    assert ended["reason"] == "agent_restarted", ended
    assert again.commands("wf-p:s") == []  # the move was not sent to the new boot
    told = eventually(
        lambda: [
            r["body"]
            for r in cloud.requests("/v1/a2a/workflow/events")
            if r["body"]["event"].get("status") == "WORKFLOW_FAILED"
            and r["body"]["workflow_id"] == "wf-p"
        ]
    )
    assert told[0]["event"]["reason"] == "agent_restarted"
    [detail] = trace_details(state_rows, "wf-p", "presence")
    assert json.loads(detail)["at_start"] is True
    print(f"robot restart -> move settled: {settled:.2f} s (includes the runtime's start)")
    again.stop()


def test_bad_statuses_are_refused_and_an_unknown_capability_is_kept_not_acted_on(
    runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    runtime_factory()
    probe.publish(f"{ROOT}/agent/mobility/status", {"state": "maybe", "boot_id": "b-x"})
    assert refusal(probe, "invalid_field", boot_id="b-x")["topic"].endswith("mobility/status")
    probe.publish(f"{ROOT}/agent/mobility/status", {"state": "online"})  # no boot_id
    probe.publish(f"{ROOT}/agent/mobility/status", b"not json")
    probe.publish(f"{ROOT}/agent/toaster/status", {"state": "offline", "boot_id": "t-1"})
    eventually(lambda: agents_row(state_rows, "toaster") == ("offline", "t-1", 0))
    assert agents_row(state_rows, "mobility") is None  # the refused ones changed nothing
    errors = probe.messages(f"{ROOT}/runtime/error")
    assert len([e for e in errors if e["topic"].endswith("/agent/mobility/status")]) == 3


def test_status_the_console_and_metrics_list_the_agents(
    broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    port = free_port()
    runtime = runtime_factory(metrics={"enabled": True, "port": port})
    agent = AgentProc(broker.port, "mobility")
    agent.kill()
    status_of(probe, "mobility", "offline", agent.boot_id)
    probe.publish(f"{ROOT}/agent/toaster/status", {"state": "online", "boot_id": "t-1"})
    eventually(lambda: agents_row(state_rows, "toaster") == ("online", "t-1", 0))
    eventually(lambda: agents_row(state_rows, "mobility") == ("offline", agent.boot_id, 1))
    config = str(runtime.config)
    shown = json.loads(a2a_edge("status", "--json", "--config", config).stdout)
    agents = {a["capability_id"]: a for a in shown["agents"]}
    assert agents["mobility"]["state"] == "offline"
    assert agents["mobility"]["boot_id"] == agent.boot_id and agents["mobility"]["since"]
    assert agents["toaster"]["known"] is False
    table = a2a_edge("status", "--config", config).stdout
    assert "agents" in table and agent.boot_id in table and "(not in the catalog)" in table
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    assert 'a2a_agent_online{capability_id="mobility",known="1"} 0.0' in metrics
    assert 'a2a_agent_online{capability_id="toaster",known="0"} 1.0' in metrics
    page = console_health(load_settings(Path(config)))
    assert {a["capability_id"] for a in page["agents"]} == {"mobility", "toaster"}


def test_a_flood_of_status_flips_does_not_starve_presses_and_turns(
    broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    """2,000 flips of an agent's status: a PUI press and a turn sent in the middle of them
    are answered within a few seconds (their own inputs, not behind the whole flood)."""
    runtime_factory()
    flips = 2000
    flooder = MqttProbe(broker.port, [], root=ROOT)
    try:
        for n in range(flips):
            state = "online" if n % 2 else "offline"
            body = json.dumps({"state": state, "boot_id": f"b-{n % 7}"}).encode()
            flooder.client.publish(f"{ROOT}/agent/display/status", body, qos=1)
            if n == flips // 2:
                pressed = time.monotonic()
                probe.publish(f"{ROOT}/pui/event", {"event_id": "pui-flood", "kind": "cancel"})
                probe.publish(
                    f"{ROOT}/turn/request", {"turn_id": "t-flood", "recognized_text": "안녕"}
                )
        result = probe.wait_for(
            f"{ROOT}/pui/result", lambda b: b["event_id"] == "pui-flood", timeout_s=20
        )
        answered = time.monotonic() - pressed
        probe.wait_for(f"{ROOT}/turn/response", lambda b: b["turn_id"] == "t-flood", 20)
        turned = time.monotonic() - pressed
    finally:
        flooder.close()
    assert result["status"] == "nothing_active"
    print(f"press answered {answered:.2f} s, turn {turned:.2f} s into {flips} flips")
    assert answered < 5.0 and turned < 8.0, (answered, turned)
