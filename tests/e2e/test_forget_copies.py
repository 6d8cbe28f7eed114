"""A forget reaches every file the runtime keeps (SPEC §5.5 "the state DB file"): `state.db` and
its WAL, the pre-migration copy in `<state_dir>/backups/`, a WAL set aside after a fault and
the dead-lettered inbound payloads — through the real service over MQTT and through
`a2a-edge memory forget` with no service running. Raw bytes of every file under the state dir
are searched, the Korean part (UTF-8) and the ASCII part of the marker apart."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

from a2a_common.clock import iso
from a2a_common.sqlite import open_state_db
from edge.store.schema import MIGRATIONS
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, state_dir

KOREAN, ASCII = "장미꽃비밀번호", "Zq7xMarker93kT"
MARKER = f"현관 {KOREAN} {ASCII} 이야"
NEEDLES = [KOREAN.encode(), ASCII.encode()]


def holding(directory: Path) -> list[str]:
    """Every file under `directory` that holds a byte string of the marker."""
    found = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(directory)}: {n!r}" for n in NEEDLES if n in data]
    return found


def older_db_with_the_marker(db: Path) -> None:
    """A state DB of the schema one migration ago that holds the marker in a pair: the next
    open migrates it, and the copy it makes first holds the marker."""
    db.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    said_at = iso(datetime.now(UTC) - timedelta(minutes=1))  # recent: no retention removes it
    old = open_state_db(db, MIGRATIONS[:-1])
    old.execute(
        "INSERT INTO sessions (session_id, started_at, last_turn_at) VALUES ('s-old', ?, ?)",
        [said_at, said_at],
    )
    old.execute(
        "INSERT INTO pairs (pair_id, turn_id, session_id, user_text, assistant_text, status,"
        " created_at, completed_at) VALUES ('p-old', 't-old', 's-old', ?, '네', 'ok', ?, ?)",
        [MARKER, said_at, said_at],
    )
    old.conn.commit()
    old.close()


def a_wal_set_aside(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> Path:
    """The service's own way: a turn with the marker is written (its WAL holds the pages),
    `state.db` is replaced under the running service (a consistent copy, as an operator
    restoring one would), the service stops with exit 1 and moves its WAL aside."""
    runtime = runtime_factory(storage={"max_wal_mb": 64}, env={"A2A_DEBUG_HOOKS": "1"})
    db = state_dir(tmp_path) / "state.db"
    assert probe.turn("t-marker", MARKER)["status"] == "ok"
    copy = tmp_path / "copy.db"
    source = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    with closing(source), closing(sqlite3.connect(copy)) as dst:
        source.backup(dst)
    os.replace(copy, db)
    probe.publish(f"{ROOT}/turn/request", {"turn_id": "t-poke", "recognized_text": "안녕"})
    assert runtime.proc is not None
    assert runtime.proc.wait(timeout=20) == 1
    (aside,) = db.parent.glob("state.db-wal.orphaned-*")
    return aside


def test_a_forget_all_over_mqtt_leaves_no_byte_of_the_marker_under_the_state_dir(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    state = state_dir(tmp_path)
    older_db_with_the_marker(state / "state.db")
    aside = a_wal_set_aside(tmp_path, runtime_factory, probe, state_rows)
    runtime = runtime_factory(storage={"max_wal_mb": 64}, env={"A2A_DEBUG_HOOKS": "1"})
    # a turn a handler fails on: refused, its payload kept as a dead letter
    probe.publish(
        f"{ROOT}/turn/request",
        {"turn_id": "t-dead", "recognized_text": MARKER, "a2a_debug_raise": True},
    )
    eventually(lambda: state_rows("SELECT count(*) FROM inbox_dead") == [(1,)], 15)
    (backup,) = (state / "backups").glob("state-v*.db")
    for copy in (backup, aside):  # every kind of file holds it before the forget
        assert KOREAN.encode() in copy.read_bytes() and ASCII.encode() in copy.read_bytes()
    assert state_rows("SELECT count(*) FROM pairs WHERE user_text = ?", [MARKER]) == [(2,)]
    probe.publish(f"{ROOT}/memory/forget", {"request_id": "f-all", "scope": "all"})
    result = probe.wait_for(
        f"{ROOT}/memory/forget/result", lambda b: b.get("request_id") == "f-all", timeout_s=15
    )
    assert result["removed"]["pairs"] >= 1
    # no reader pins the log: the TRUNCATE ran before the answer was handed to the broker
    assert not backup.exists() and not aside.exists()
    assert holding(state) == []
    assert runtime.terminate() == 0
    assert holding(state) == []


def test_memory_forget_all_without_a_service_leaves_no_byte_of_the_marker(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    older_db_with_the_marker(state / "state.db")
    # a WAL set aside after a fault (named and placed as edge/host/statefiles.py does): the
    # log of a DB that held the marker
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.execute("INSERT INTO t VALUES (?)", [MARKER])
        conn.commit()
        aside = state / "state.db-wal.orphaned-20260105T090000Z"
        aside.write_bytes((tmp_path / "other.db-wal").read_bytes())
    assert KOREAN.encode() in aside.read_bytes()
    config = tmp_path / "config.toml"
    config.write_text(f'state_dir = "{state}"\n[mqtt]\nport = 1\nreconnect_max_s = 1\n')
    forget = ["memory", "forget", "--all", "--yes", "--json", "--config", str(config)]
    done = subprocess.run(
        [sys.executable, "-m", "edge", *forget],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert '"pairs": 1' in done.stdout
    assert holding(state) == []
    assert not list((state / "backups").glob("state-v*.db"))
