"""Tables of the memory cache (migrations in order; never edit a shipped one, add a new one)."""

from __future__ import annotations

import sqlite_utils

from a2a_common.sqlite import Migration


def _v1(db: sqlite_utils.Database) -> None:
    db.execute(
        """CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            started_at TEXT NOT NULL,
            last_turn_at TEXT NOT NULL,
            summary TEXT NOT NULL DEFAULT '')"""
    )
    db.execute("CREATE INDEX sessions_last_turn ON sessions (last_turn_at)")
    db.execute(
        """CREATE TABLE pairs (
            pair_id TEXT PRIMARY KEY,
            turn_id TEXT NOT NULL UNIQUE,
            session_id TEXT NOT NULL REFERENCES sessions (session_id),
            user_text TEXT NOT NULL,
            assistant_text TEXT NOT NULL DEFAULT '',
            route_family TEXT,
            workflow_id TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'pending',
            created_at TEXT NOT NULL,
            completed_at TEXT)"""
    )
    db.execute("CREATE INDEX pairs_created ON pairs (created_at)")
    db.execute("CREATE INDEX pairs_status ON pairs (status) WHERE status = 'pending'")
    db.execute(
        """CREATE TABLE device_state (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL)"""
    )
    db.execute(
        """CREATE TABLE sync_position (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            cursor TEXT NOT NULL,
            version TEXT NOT NULL)"""
    )
    db.execute("INSERT INTO sync_position (id, cursor, version) VALUES (1, '', '')")


MIGRATIONS = [Migration("cache_0001_pairs_sessions_state", _v1)]
