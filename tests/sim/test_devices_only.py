"""`a2a-edge sim devices --only/--exclude` (issue 35 item 4): the simulator subscribes to the
capabilities it is told to serve and no other, so a device team's own agent answers its own
capability alone; on main it took every capability's commands (`+`) and answered the ones it
does not simulate FAILED unsupported_operation within a millisecond."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edge.cli.entry import main
from sim.broker import Mosquitto
from sim.devices import SIMULATED, DeviceAgents, served
from sim.probe import MqttProbe
from tests.conftest import DEVICE, ROOT, eventually


def command(capability: str, operation: str, task_id: str) -> dict[str, object]:
    workflow_id, step_id = task_id.split(":")
    return {
        "task_id": task_id,
        "workflow_id": workflow_id,
        "step_id": step_id,
        "capability_id": capability,
        "operation_id": operation,
        "args": {"text": "안녕"},
        "attempt": 1,
    }


@pytest.mark.parametrize(
    "options", [{"exclude": ["arm"]}, {"only": ["speaker"]}, {"exclude": ["mobility"]}]
)
def test_a_capability_not_served_is_not_answered(
    broker: Mosquitto, probe: MqttProbe, options: dict[str, list[str]]
) -> None:
    agents = DeviceAgents(broker.port, ROOT, **options)
    try:
        for capability, operation in (("arm", "pick_up"), ("mobility", "move_to_room")):
            task_id = f"wf-{capability}:step"
            probe.publish(
                f"{ROOT}/task/command/{capability}", command(capability, operation, task_id)
            )
        probe.publish(f"{ROOT}/task/command/speaker", command("speaker", "say", "wf-say:step"))
        # the simulator's answers leave in order: once the speaker's are here, any earlier is too
        done = probe.wait_for(f"{ROOT}/task/callback/speaker", lambda b: b["status"] == "COMPLETED")
        assert done["agent"] == "sim-devices"  # who answered, for the trace
        assert probe.messages(f"{ROOT}/task/callback/arm") == []
        if "mobility" in agents.capabilities:
            probe.wait_for(f"{ROOT}/task/callback/mobility")
        else:
            assert probe.messages(f"{ROOT}/task/callback/mobility") == []
        assert "wf-arm:step" not in agents.tasks
    finally:
        agents.close()


def test_what_is_served() -> None:
    assert served() == ["*"]  # every capability, as before
    assert served(exclude=["arm"]) == list(SIMULATED)
    assert served(exclude=["mobility"]) == [c for c in SIMULATED if c != "mobility"]
    assert served(only=["speaker", "display"]) == ["speaker", "display"]
    with pytest.raises(ValueError, match="not simulated: arm"):
        served(only=["arm"])


def test_only_a_capability_it_does_not_simulate_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sim", "devices", "--port", "1", "--only", "arm"]) == 2
    assert "not simulated: arm" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # one or the other
        main(["sim", "devices", "--only", "speaker", "--exclude", "arm"])


def sim_devices(tmp_path: Path, port: int, log: str, *options: str) -> subprocess.Popen[bytes]:
    """`a2a-edge sim devices` as a user starts it; back once it says it serves (subscribed)."""
    out = tmp_path / log
    with out.open("wb") as sink:
        a2a_edge = str(Path(sys.executable).parent / "a2a-edge")
        args = ["sim", "devices", "--port", str(port), "--device-id", DEVICE, *options]
        proc = subprocess.Popen([a2a_edge, *args], stdout=sink, stderr=subprocess.STDOUT)
    try:
        eventually(lambda: f"sim devices for {ROOT}" in out.read_text(), timeout_s=30)
    except AssertionError:
        proc.kill()
        raise AssertionError(f"sim devices did not start: {out.read_text()!r}") from None
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_restarted_with_exclude_it_never_answers_what_it_no_longer_serves(
    tmp_path: Path, broker: Mosquitto, probe: MqttProbe
) -> None:
    """README "Run it yourself", then docs/device-agents.md §10: the simulator ran serving
    everything, the team restarts it with `--exclude arm` on the same broker. On main it came
    back on its old broker session (client id `sim-devices-<P>`), whose `+` subscriptions still
    covered the arm, and answered the team's arm tasks FAILED unsupported_operation."""
    stop(sim_devices(tmp_path, broker.port, "all.log"))
    narrowed = sim_devices(tmp_path, broker.port, "narrowed.log", "--exclude", "arm")
    try:
        probe.publish(f"{ROOT}/task/command/arm", command("arm", "pick_up", "wf-arm:step"))
        probe.publish(f"{ROOT}/task/command/speaker", command("speaker", "say", "wf-say:step"))
        # the simulator's answers leave in order: once the speaker's are here, any earlier is too
        probe.wait_for(f"{ROOT}/task/callback/speaker", lambda b: b["status"] == "COMPLETED")
        assert probe.messages(f"{ROOT}/task/callback/arm") == []
        assert probe.messages(f"{ROOT}/task/callback") == []
    finally:
        stop(narrowed)
    # and back to serving everything: the arm is answered again (FAILED: it simulates none)
    everything = sim_devices(tmp_path, broker.port, "again.log")
    try:
        probe.publish(f"{ROOT}/task/command/arm", command("arm", "pick_up", "wf-arm2:step"))
        failed = probe.wait_for(
            f"{ROOT}/task/callback/arm",
            lambda b: b["task_id"] == "wf-arm2:step" and b["status"] == "FAILED",
        )
        assert "unsupported_operation" in json.dumps(failed)
    finally:
        stop(everything)
