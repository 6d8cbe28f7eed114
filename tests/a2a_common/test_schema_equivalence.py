"""The runtime's DB is a `sqlite_utils.Database`, and the migrations written with sqlite-utils'
table API build the schema the hand-written SQL built before them: at every step, for a fresh
DB and for one an earlier a2a-edge left at that step. tests/fixtures/state_schema.json holds
`sqlite_master` as the hand-written migrations left it after each step (generated before the
change). sqlite-utils quotes identifiers and lays statements out its own way, so `sql` is
compared without quotes and whitespace; triggers, written by hand still, byte for byte."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from a2a_common.db import Database
from a2a_common.sqlite import open_readonly, open_state_db
from edge.store.schema import MIGRATIONS

FIXTURE = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "state_schema.json").read_text(encoding="utf-8")
)
Entry = tuple[str, str, str, str | None]


def normal(sql: str | None) -> str | None:
    if sql is None:
        return None
    text = re.sub(r"\s+", " ", sql.replace('"', ""))
    return re.sub(r"\s*([(),])\s*", r"\1", text).strip()


def expected(step: int) -> list[Entry]:
    """`sqlite_master` after `step` migrations, as the hand-written migrations left it."""
    objects = FIXTURE["objects"]
    return [tuple(objects[i]) for i in FIXTURE["steps"][step - 1]]  # type: ignore[misc]


def master(conn: sqlite3.Connection) -> list[Entry]:
    return [
        tuple(row)  # type: ignore[misc]
        for row in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        )
    ]


def assert_same_schema(found: list[Entry], want: list[Entry]) -> None:
    assert [(t, n, tb, normal(sql)) for t, n, tb, sql in found] == [
        (t, n, tb, normal(sql)) for t, n, tb, sql in want
    ]
    triggers = [entry for entry in found if entry[0] == "trigger"]
    assert triggers == [entry for entry in want if entry[0] == "trigger"]


def test_the_fixture_names_the_migrations_in_order() -> None:
    assert [m.name for m in MIGRATIONS] == FIXTURE["migrations"]


def test_the_runtime_db_is_a_sqlite_utils_database(tmp_path: Path) -> None:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    try:
        assert isinstance(db, sqlite_utils.Database) and isinstance(db, Database)
        assert db.execute("PRAGMA recursive_triggers").fetchone()[0] == 1
    finally:
        db.close()
    reader = open_readonly(tmp_path / "state.db", len(MIGRATIONS))
    try:
        assert isinstance(reader, sqlite_utils.Database)
        assert reader["schema_migrations"].count_where() == len(MIGRATIONS)
    finally:
        reader.close()


@pytest.mark.parametrize("step", range(1, len(MIGRATIONS) + 1))
def test_a_fresh_db_has_the_schema_of_the_hand_written_migrations(
    tmp_path: Path, step: int
) -> None:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS[:step])
    try:
        assert_same_schema(master(db.conn), expected(step))
    finally:
        db.close()


def left_by_an_earlier_release(path: Path, step: int) -> None:
    """A DB as the hand-written migrations left it after `step` (their exact SQL text)."""
    conn = sqlite3.connect(path)
    entries: list[Any] = expected(step)
    order = {"table": 0, "index": 1, "trigger": 2, "view": 3}
    for _kind, name, _table, sql in sorted(entries, key=lambda e: order[e[0]]):
        if sql is not None and name != "sqlite_sequence":  # SQLite makes that one itself
            conn.execute(sql)
    conn.executemany(
        "INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
        [(n + 1, MIGRATIONS[n].name) for n in range(step)],
    )
    if step >= 2:
        conn.execute("INSERT INTO sync_position (id, cursor, version) VALUES (1, '', '')")
    conn.execute(f"PRAGMA user_version={step}")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("step", range(1, len(MIGRATIONS)))
def test_a_db_left_by_an_earlier_release_migrates_as_before(tmp_path: Path, step: int) -> None:
    path = tmp_path / "state.db"
    left_by_an_earlier_release(path, step)
    db = open_state_db(path, MIGRATIONS)
    try:
        assert_same_schema(master(db.conn), expected(len(MIGRATIONS)))
        assert db["schema_migrations"].count_where() == len(MIGRATIONS)
    finally:
        db.close()
