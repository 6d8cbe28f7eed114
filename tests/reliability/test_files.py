"""The state dir's files (SPEC §6), attacked as an operator might: two services on one state
dir, a CLI write behind a running service. Each runs the real process."""

from __future__ import annotations

from pathlib import Path

from sim.broker import Mosquitto
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, state_dir, wait_online
from tests.reliability.files import edge_cli, run_to_exit

EVENTS = f"{ROOT}/workflow/event"
HOLD = {  # a workflow that stays `running` for ten minutes by itself
    "workflow_id": "wf-hold",
    "steps": [{"step_id": "rest", "kind": "wait", "wait_s": 600}],
}


def _refused(lines: list[str], code: int, *words: str) -> str:
    """Exit 3 with exactly one line, from the CLI's storage handler, naming `words`."""
    assert code == 3, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith("a2a-edge: state DB: "), lines
    for word in words:
        assert word in lines[0], lines
    return lines[0]


# --- one writer per state dir -----------------------------------------------------------------


def test_a_second_run_on_one_state_dir_exits_3_naming_the_holder(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    first = runtime_factory()
    assert first.proc is not None
    code, lines, _second = run_to_exit(tmp_path, runtime_factory)
    _refused(lines, code, f"pid {first.proc.pid}", "one writer")
    assert first.proc.poll() is None
    lock = state_dir(tmp_path) / "lock"
    assert lock.stat().st_mode & 0o777 == 0o600
    assert lock.read_text().split()[0] == str(first.proc.pid)
    assert probe.turn("t-after", "안녕")["status"] == "ok"
    assert len(probe.messages(f"{ROOT}/turn/response")) == 1  # answered once, by one service


def test_a_run_waits_for_a_cli_writer_then_starts(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    from edge.statelock import StateLock  # here: the other cases also run against older code

    state = state_dir(tmp_path)
    state.mkdir(parents=True)
    held = StateLock.take(state, "cli workflow.cancel")  # as a CLI writer holds it
    runtime = runtime_factory(wait_ready=False)
    eventually(lambda: "waiting for a2a-edge workflow.cancel" in runtime.log())
    assert runtime.proc is not None and runtime.proc.poll() is None
    assert not runtime.notify or "READY=1" not in runtime.notify.lines
    held.release()
    assert runtime.wait_line("READY=1", 20), runtime.log()


def test_a_cancel_with_the_broker_down_changes_nothing_behind_the_service(
    tmp_path: Path,
    broker: Mosquitto,
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    state_rows: StateRows,
) -> None:
    runtime = runtime_factory()
    assert runtime.proc is not None
    config = str(runtime.config)
    probe.publish(f"{ROOT}/workflow/request", HOLD)
    probe.wait_for(EVENTS, lambda b: b.get("step_id") == "rest" and b["status"] == "RUNNING")
    row = "SELECT status, etag, updated_at FROM workflows WHERE workflow_id = 'wf-hold'"
    before = state_rows(row)
    assert before[0][0] == "running"
    broker.stop()
    refused = edge_cli("workflows", "cancel", "wf-hold", "--config", config)
    assert refused.returncode == 1, refused
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pid {runtime.proc.pid}" in lines[0], lines
    assert "nothing was changed" in lines[0]
    assert state_rows(row) == before
    broker.start()
    wait_online(broker.port, "")
    done = edge_cli("workflows", "cancel", "wf-hold", "--config", config)
    assert done.returncode == 0, done.stderr  # through the service, its one writer
    eventually(lambda: state_rows(row)[0][0] == "cancelled")
    assert runtime.terminate() == 0
    offline = edge_cli("memory", "forget", "--all", "--config", config)
    assert offline.returncode == 0, offline.stderr  # no service: the CLI takes the lock itself
