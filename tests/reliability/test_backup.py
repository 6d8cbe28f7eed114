"""Backups of the state DB (SPEC §6): `a2a-edge db backup FILE` while the service answers
turns, restored over `state.db`; the runtime's own copy before a schema migration."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from a2a_common.sqlite import open_state_db
from edge.store.schema import MIGRATIONS
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, read_rows, state_dir
from tests.reliability.files import edge_cli


def _answered(probe: MqttProbe, prefix: str, count: int) -> bool:
    seen = {b.get("turn_id") for b in probe.messages(f"{ROOT}/turn/response")}
    return {f"{prefix}-{n}" for n in range(count)} <= seen


def test_a_backup_taken_while_turns_are_answered_restores(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    runtime = runtime_factory()
    config = str(runtime.config)
    for n in range(5):
        assert probe.turn(f"before-{n}", f"안녕 {n}")["status"] == "ok"
    for n in range(40):  # the service is busy answering these while the copy is made
        probe.publish(f"{ROOT}/turn/request", {"turn_id": f"during-{n}", "recognized_text": "응"})
    copy = tmp_path / "saved" / "copy.db"
    copy.parent.mkdir()
    made = edge_cli("db", "backup", str(copy), "--config", config)
    assert made.returncode == 0, made.stderr
    assert made.stdout.split() == [str(copy), str(copy.stat().st_size), "bytes"]
    assert copy.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in copy.parent.iterdir()) == ["copy.db"]  # no temp file left
    eventually(lambda: _answered(probe, "during", 40), 30)
    assert runtime.terminate() == 0
    saved = {row[0] for row in read_rows(copy, "SELECT turn_id FROM pairs")}
    assert {f"before-{n}" for n in range(5)} <= saved

    db = state_dir(tmp_path) / "state.db"
    for stale in db.parent.glob("state.db*"):
        stale.unlink()
    shutil.copyfile(copy, db)
    runtime.start()
    assert state_rows("PRAGMA integrity_check") == [("ok",)]
    restored = {row[0] for row in state_rows("SELECT turn_id FROM pairs")}
    assert restored == saved
    assert probe.turn("after", "안녕")["status"] == "ok"
    assert not (db.parent / "backups").exists()  # same schema: no migration, no automatic copy


def test_a_backup_into_a_missing_directory_is_a_clear_error(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    runtime = runtime_factory()
    dest = tmp_path / "no-such-dir" / "copy.db"
    failed = edge_cli("db", "backup", str(dest), "--config", str(runtime.config))
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines() == [
        f"a2a-edge: cannot write {dest}: directory {dest.parent} does not exist"
    ]
    assert not dest.parent.exists()


def test_a_schema_migration_is_preceded_by_a_backup(
    tmp_path: Path, runtime_factory: RuntimeFactory, state_rows: StateRows
) -> None:
    db = state_dir(tmp_path) / "state.db"
    old = open_state_db(db, MIGRATIONS[:-1])  # the schema one migration ago
    old.execute("INSERT INTO device_state (key, value) VALUES ('marker', '\"old\"')")
    old.conn.commit()
    old.close()
    runtime = runtime_factory()
    assert state_rows("PRAGMA user_version") == [(len(MIGRATIONS),)]
    backups = db.parent / "backups"
    assert backups.stat().st_mode & 0o777 == 0o700
    (copy,) = backups.iterdir()
    assert copy.name.startswith(f"state-v{len(MIGRATIONS) - 1}-") and copy.name.endswith("Z.db")
    assert copy.stat().st_mode & 0o777 == 0o600
    assert copy.read_bytes()[18:20] == b"\x01\x01"  # a rollback-journal file: no WAL beside it
    with closing(sqlite3.connect(f"file:{copy}?mode=ro", uri=True)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS) - 1,)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        marker = conn.execute("SELECT value FROM device_state WHERE key = 'marker'").fetchone()
        assert marker == ('"old"',)
    assert f"backed up schema v{len(MIGRATIONS) - 1}" in runtime.log()
    assert runtime.terminate() == 0
    runtime.start()  # no migration this time: no second copy
    assert [p.name for p in backups.iterdir()] == [copy.name]
