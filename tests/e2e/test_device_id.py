"""A `device_id` changed over an existing state dir (issue 35 item 7): the start is refused,
exit 2, with one line naming both ids, and nothing is changed — unless `run
--accept-new-device-id`, `accept_new_device_id = true` or `A2A_EDGE_ACCEPT_NEW_DEVICE_ID=1` says
the new id is meant. The id is kept in the DB's `device_state`; a DB from before that key adopts
the configured id without a word."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from sim.broker import Mosquitto
from sim.processes import RuntimeProcess
from tests.conftest import DEVICE, RuntimeFactory, eventually

NEW = "robot-renamed"


def kept_id(db: Path) -> str | None:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM device_state WHERE key = 'device_id'").fetchone()
    finally:
        conn.close()
    return None if row is None else str(json.loads(row[0]))


def renamed(config: Path, extra: str = "") -> None:
    text = config.read_text()
    assert f'device_id = "{DEVICE}"' in text
    config.write_text(extra + text.replace(f'device_id = "{DEVICE}"', f'device_id = "{NEW}"'))


def run(config: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "edge", "run", "--config", str(config), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**{k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}, **(env or {})},
    )


def digest(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


def test_a_new_device_id_over_kept_state_is_refused_with_both_ids(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    runtime = runtime_factory()
    db = tmp_path / "state" / "state.db"
    assert runtime.terminate() == 0
    renamed(runtime.config)
    before = digest(db)
    proc = run(runtime.config)
    try:
        _out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 2, err
    lines = [line for line in err.splitlines() if line.startswith("a2a-edge:")]
    assert len(lines) == 1 and lines[0] == err.strip().splitlines()[-1], err
    assert lines[0].startswith("a2a-edge: config error: device_id: ")
    assert repr(NEW) in lines[0] and repr(DEVICE) in lines[0], lines[0]
    assert "--accept-new-device-id" in lines[0]
    assert kept_id(db) == DEVICE and digest(db) == before  # nothing was changed


def test_the_flag_or_the_environment_accepts_the_new_id(
    tmp_path: Path, runtime_factory: RuntimeFactory, broker: Mosquitto
) -> None:
    runtime = runtime_factory()
    db = tmp_path / "state" / "state.db"
    assert eventually(lambda: kept_id(db) == DEVICE)
    assert runtime.terminate() == 0
    renamed(runtime.config)
    proc = run(runtime.config, "--accept-new-device-id")
    try:
        assert eventually(lambda: kept_id(db) == NEW, timeout_s=30)
    finally:
        proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"device_id changed from {DEVICE} to {NEW} over the same state (accepted)" in err
    again = RuntimeProcess(runtime.config, tmp_path / "again")  # the new id is the kept one now
    (tmp_path / "again").mkdir()
    try:
        again.start()
        assert again.terminate() == 0
    finally:
        again.close()

    back = runtime.config.read_text().replace(f'device_id = "{NEW}"', f'device_id = "{DEVICE}"')
    runtime.config.write_text(back)
    proc = run(runtime.config)
    assert proc.communicate(timeout=60)[1] and proc.returncode == 2
    by_env = RuntimeProcess(
        runtime.config, tmp_path / "env", env={"A2A_EDGE_ACCEPT_NEW_DEVICE_ID": "1"}
    )
    (tmp_path / "env").mkdir()
    try:
        by_env.start()
        assert kept_id(db) == DEVICE
        assert by_env.terminate() == 0
    finally:
        by_env.close()


def test_a_db_from_before_the_kept_id_adopts_the_configured_one(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    runtime = runtime_factory()
    db = tmp_path / "state" / "state.db"
    assert eventually(lambda: kept_id(db) == DEVICE)
    assert runtime.terminate() == 0
    conn = sqlite3.connect(db)  # what the previous release left: no device_id row
    conn.execute("DELETE FROM device_state WHERE key = 'device_id'")
    conn.commit()
    conn.close()
    renamed(runtime.config)
    mark = len(runtime.log())
    runtime.start()
    assert eventually(lambda: kept_id(db) == NEW)
    assert runtime.terminate() == 0
    assert "device_id changed" not in runtime.log()[mark:]
