"""The state dir's files (SPEC §6), attacked as an operator might: two services on one state
dir, a CLI write behind a running service, a damaged or misplaced `state.db`, a state dir that
cannot be written, the DB made immutable while the service runs. Each runs the real process."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
from pathlib import Path

import pytest

from sim.broker import Mosquitto
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, state_dir, wait_online
from tests.reliability.files import (
    edge_cli,
    immutable,
    read_only_dir,
    run_to_exit,
    smash_page,
    table_pages,
)

# bind-mounts and remounts on the host: never beside the booted systemd container (on two
# workers its unit stops failed: "Failed to kill control group ...: Input/output error")
pytestmark = pytest.mark.xdist_group("system")

EVENTS = f"{ROOT}/workflow/event"
CHECKPOINT_FAILED = re.compile(r"WAL checkpoint \(\w+\) failed")
HOLD = {  # a workflow that stays `running` for ten minutes by itself
    "workflow_id": "wf-hold",
    "steps": [{"step_id": "rest", "kind": "wait", "wait_s": 600}],
}


def _populated(runtime_factory: RuntimeFactory, probe: MqttProbe, turns: int = 3) -> Path:
    """A state DB with a few answered turns, the service stopped cleanly; its path."""
    runtime = runtime_factory()
    for n in range(turns):
        assert probe.turn(f"t-{n}", f"안녕 {n}")["status"] == "ok"
    assert runtime.terminate() == 0
    return runtime.config.parent / "state" / "state.db"


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
    # the first run's start ends after READY (SPEC 4.8: the re-arm waits for the agents'
    # statuses) and it logs into the same file: wait for it, so the lines read are the second's
    eventually(lambda: "re-armed after the agents' statuses" in first.log(), 10)
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
    from edge.host.statelock import StateLock  # here: the other cases also run against older code

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
    offline = edge_cli("memory", "forget", "--all", "--yes", "--config", config)
    assert offline.returncode == 0, offline.stderr  # no service: the CLI takes the lock itself


# --- the start-up check ------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["header", "pairs", "memory_audit"])
def test_a_page_of_random_bytes_exits_3_with_one_line(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, where: str
) -> None:
    db = _populated(runtime_factory, probe)
    page = 1 if where == "header" else table_pages(db, where)[0]
    smash_page(db, page)
    code, lines, runtime = run_to_exit(tmp_path, runtime_factory)
    _refused(lines, code, str(db))
    assert runtime.notify is not None and "READY=1" not in runtime.notify.lines


def test_a_symlinked_state_db_exits_3_and_its_target_is_untouched(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    db = _populated(runtime_factory, probe)
    target = tmp_path / "elsewhere" / "real.db"
    target.parent.mkdir()
    db.rename(target)
    target.chmod(0o644)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    db.symlink_to(target)
    code, lines, _runtime = run_to_exit(tmp_path, runtime_factory)
    _refused(lines, code, "symlink")
    assert target.stat().st_mode & 0o777 == 0o644
    assert hashlib.sha256(target.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in target.parent.iterdir()) == ["real.db"]  # no WAL made there


def test_a_dangling_symlink_exits_3_and_creates_nothing(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    state = state_dir(tmp_path)
    state.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (state / "state.db").symlink_to(outside / "state.db")
    code, lines, _runtime = run_to_exit(tmp_path, runtime_factory)
    _refused(lines, code, "symlink")
    assert list(outside.iterdir()) == []


def test_a_directory_named_state_db_exits_3(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    (state_dir(tmp_path) / "state.db").mkdir(parents=True)
    code, lines, _runtime = run_to_exit(tmp_path, runtime_factory)
    _refused(lines, code, "directory")


@pytest.mark.parametrize("how", ["mount", "chattr", "chmod"])
def test_a_read_only_state_dir_exits_3(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, how: str
) -> None:
    db = _populated(runtime_factory, probe)
    with read_only_dir(db.parent, how):
        code, lines, _runtime = run_to_exit(tmp_path, runtime_factory)
    _refused(lines, code, str(db.parent))


def test_an_immutable_db_while_running_is_a_logged_storage_error_not_sigbus(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    """SPEC §6 asks the service to stop (exit 1) only when it cannot keep what it acknowledges.
    An immutable state.db still takes commits in its WAL (durable), so the service stays up,
    answers, and logs each checkpoint the file refuses; nothing is lost once the flag goes.
    A 1 MB bound: the WAL is copied back past a quarter of it, which the 20 turns pass."""
    runtime = runtime_factory(storage={"max_wal_mb": 1})
    assert runtime.proc is not None
    db = state_dir(tmp_path) / "state.db"
    assert probe.turn("t-before", "안녕")["status"] == "ok"
    with immutable(db):
        os.sync()  # clean pages are write-protected again: a write through a mapping faults
        for n in range(20):
            assert probe.turn(f"t-imm-{n}", "가" * 2000)["status"] == "ok"
        # "WAL checkpoint (RESTART) failed (tried again in 0.5s): ..." (the mode named: 9e0fe50)
        eventually(lambda: CHECKPOINT_FAILED.search(runtime.log()), 15)
        assert runtime.proc.poll() is None, runtime.log()
        assert runtime.terminate() == 0  # a clean stop: what the WAL holds stays there
        code, lines, _again = run_to_exit(tmp_path, runtime_factory)
        _refused(lines, code, "state.db", "cannot be written")  # a restart meanwhile: refused
    runtime.start()
    assert state_rows("PRAGMA integrity_check") == [("ok",)]
    turns = {row[0] for row in state_rows("SELECT turn_id FROM pairs")}
    assert {"t-before", *(f"t-imm-{n}" for n in range(20))} <= turns


def test_an_immutable_shm_while_running_leaves_a_stack_and_the_restart_exits_3(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    """SQLite's WAL index is a shared mapping of state.db-shm, whatever `mmap_size` says; a
    write fault on a page of an immutable file is SIGBUS from the kernel, which no code in the
    process can turn into an error. What we can do: faulthandler leaves the fatal error and
    every thread's stack in the log, and the restart systemd makes is refused with one line."""
    runtime = runtime_factory()
    assert runtime.proc is not None
    shm = state_dir(tmp_path) / "state.db-shm"
    assert probe.turn("t-before", "안녕")["status"] == "ok"
    with immutable(shm):
        os.sync()
        for n in range(10):
            if runtime.proc.poll() is not None:
                break
            with contextlib.suppress(TimeoutError):
                probe.turn(f"t-imm-{n}", "가" * 2000, timeout_s=3)
        if runtime.proc.poll() is not None:  # the kernel refused a write fault
            assert runtime.proc.returncode == -signal.SIGBUS
            assert "Fatal Python error: Bus error" in runtime.log()
        code, lines, _again = run_to_exit(tmp_path, runtime_factory)
        _refused(lines, code, "state.db-shm", "cannot be written")
