"""Issue 23's schema changes (fewer b-trees, no AUTOINCREMENT) over a real SQLite file: a DB
of the schema before them keeps its rows, the outbox's ids keep growing once the table is
empty, and the rebuilt tables leave no copy of a deleted row in the file."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from edge.store.outbound import DurableOutbox
from edge.store.schema import MIGRATIONS
from tests.edge.test_outbound import RecordingWire

BEFORE = 15  # migrations before issue 23's
NEEDLE = "현관 비밀번호 장미꽃"


def old_db(path: Path) -> None:
    """A DB of the schema before issue 23, a row holding NEEDLE in each rebuilt table."""
    db = open_state_db(path, MIGRATIONS[:BEFORE])
    with db.atomic():
        for sql, args in (
            ("INSERT INTO inbox_seen (key, topic, seen_at, answer) VALUES (?, 't', 's', ?)",
             ["turn:t1", NEEDLE]),
            ("INSERT INTO mqtt_outbox (topic, payload, created_at) VALUES ('a/b', ?, 'c')",
             [NEEDLE]),
            ("INSERT INTO workflow_trace (workflow_id, ts, kind, detail) VALUES ('w', 't', 'k', ?)",
             [NEEDLE]),
            ("INSERT INTO device_state (key, value) VALUES ('k', ?)", [f'"{NEEDLE}"']),
            ("INSERT INTO sync_outbox (write_id, kind, payload, created_at) VALUES"
             " ('01W', 'pair', ?, 'c')", [NEEDLE]),
            ("INSERT INTO sync_meta (key, value) VALUES ('last_error', ?)", [NEEDLE]),
        ):  # fmt: skip
            db.execute(sql, args)
    db.close()


def residue(path: Path) -> list[str]:
    needle = NEEDLE.encode()
    return [p.name for p in path.parent.glob("state.db*") if needle in p.read_bytes()]


def test_an_old_db_keeps_its_rows_and_a_deleted_row_leaves_no_copy(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    old_db(path)
    db = open_state_db(path, MIGRATIONS)
    tables = ("inbox_seen", "mqtt_outbox", "workflow_trace", "device_state", "sync_outbox")
    for table in (*tables, "sync_meta"):
        assert db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 1, table
    assert db.execute("SELECT count(*) FROM sqlite_sequence WHERE name IN (?, ?)",
                      ["mqtt_outbox", "workflow_trace"]).fetchone()[0] == 0  # fmt: skip
    schema = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    for table in ("device_state", "sync_meta"):  # inbox_seen, sync_outbox: rowid (issue 36)
        assert schema[table].endswith("WITHOUT ROWID"), table
    assert "AUTOINCREMENT" not in schema["mqtt_outbox"] + schema["workflow_trace"]
    indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "workflows_status" not in indexes and "workflow_trace_wf" in indexes
    assert residue(path)  # the copied rows hold it: the check can fail
    with db.atomic():
        for table in tables:
            db.execute(f"DELETE FROM {table}")
        db.execute("DELETE FROM sync_meta")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert residue(path) == []  # nor the dropped tables' pages: secure_delete zeroed them
    db.close()


def test_outbox_ids_keep_growing_once_the_table_is_empty(tmp_path: Path) -> None:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    outbox = DurableOutbox(db=db, clock=ManualClock())
    wire = RecordingWire()
    outbox.attach(wire)
    for n in range(3):
        with db.atomic():
            outbox.enqueue("a/b", {"n": n})
        assert outbox.flush() == 1  # sent, though SQLite alone would have reused id 1
        outbox.on_published(len(wire.sent))
        assert outbox.reap() == 1 and outbox.pending() == 0
    assert [p for _t, p, _q, _r in wire.sent] == [b'{"n":0}', b'{"n":1}', b'{"n":2}']
    db.close()
    with closing(sqlite3.connect(tmp_path / "state.db")) as conn:
        assert conn.execute("SELECT count(*) FROM mqtt_outbox").fetchone()[0] == 0
