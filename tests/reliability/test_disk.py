"""The disk fills up (a cap on the state DB stands in for a full filesystem): the input held
(not refused: its one outcome is the applied one), no corruption, and it is applied once space
returns."""

from __future__ import annotations

from pathlib import Path

from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually


def test_full_disk_refuses_cleanly_and_recovers(
    tmp_path: Path, state_rows: StateRows, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime = runtime_factory(env={"WATCHDOG_USEC": "1000000"})  # STATUS= lines, each ping
    assert runtime.terminate() == 0
    db = tmp_path / "state" / "state.db"
    size_kb = db.stat().st_size // 1024
    text = runtime.config.read_text()
    runtime.config.write_text(text + f"\n[storage]\nmax_size_kb = {size_kb + 8}\n")
    runtime.start()
    big = "가" * 1300  # ~4 KB a turn
    for n in range(12):
        probe.publish(f"{ROOT}/turn/request", {"turn_id": f"full-{n}", "recognized_text": big})
    notify = runtime.notify
    assert notify is not None  # held, not refused (SPEC §2.4): the service says it is degraded
    eventually(lambda: any(x.startswith("STATUS=degraded") for x in notify.lines), 20)
    errors = probe.messages(f"{ROOT}/runtime/error")
    assert [e for e in errors if e.get("error") == "storage_unavailable"] == []
    assert runtime.proc is not None and runtime.proc.poll() is None  # still up
    assert runtime.terminate() == 0
    assert state_rows("PRAGMA integrity_check")[0][0] == "ok"
    runtime.config.write_text(text)  # space returns
    runtime.start()
    answered = eventually(
        lambda: (
            {b["turn_id"] for b in probe.messages(f"{ROOT}/turn/response")}
            >= {f"full-{n}" for n in range(12)}
        ),
        30,
    )
    assert answered
    rows = state_rows("SELECT count(*), count(DISTINCT turn_id) FROM pairs")
    assert rows == [(12, 12)]  # each applied once
