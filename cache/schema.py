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


def _v2(db: sqlite_utils.Database) -> None:
    """Every tier of SPEC §5.1 with provenance (JSON arrays of ids)."""
    db.execute("ALTER TABLE pairs ADD COLUMN expire_at TEXT")
    db.execute("ALTER TABLE pairs ADD COLUMN synced INTEGER NOT NULL DEFAULT 0")
    db.execute(
        """CREATE TABLE daily_summaries (
            summary_id TEXT PRIMARY KEY,
            day TEXT NOT NULL UNIQUE,
            summary TEXT NOT NULL,
            source_session_ids TEXT NOT NULL DEFAULT '[]',
            expire_at TEXT,
            updated_at TEXT NOT NULL)"""
    )
    db.execute(
        """CREATE TABLE weekly_digests (
            digest_id TEXT PRIMARY KEY,
            week TEXT NOT NULL UNIQUE,
            digest TEXT NOT NULL,
            source_summary_ids TEXT NOT NULL DEFAULT '[]',
            expire_at TEXT,
            updated_at TEXT NOT NULL)"""
    )
    db.execute(
        """CREATE TABLE profile_items (
            item_id TEXT PRIMARY KEY,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            category TEXT,
            confidence REAL,
            relevance_score REAL NOT NULL DEFAULT 0.5,
            status TEXT NOT NULL DEFAULT 'candidate'
                CHECK (status IN ('candidate', 'suggestable', 'confirmed', 'revoked')),
            expire_at TEXT,
            sensitive INTEGER NOT NULL DEFAULT 0,
            source_candidate_ids TEXT NOT NULL DEFAULT '[]',
            source_summary_ids TEXT NOT NULL DEFAULT '[]',
            source_session_ids TEXT NOT NULL DEFAULT '[]',
            source_pair_ids TEXT NOT NULL DEFAULT '[]',
            origin TEXT NOT NULL DEFAULT 'device',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (key, value))"""
    )
    db.execute("CREATE INDEX profile_snapshot ON profile_items (status, relevance_score DESC, key)")
    db.execute(
        """CREATE TABLE profile_evidence (
            candidate_id TEXT PRIMARY KEY,
            item_id TEXT NOT NULL REFERENCES profile_items (item_id) ON DELETE CASCADE,
            pair_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            day TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('mention', 'suggestion_accepted')),
            source TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (item_id, pair_id))"""
    )


def _v3(db: sqlite_utils.Database) -> None:
    """Append-only audit of forgets, revocations and expiries: ids and counts, never text."""
    db.execute(
        """CREATE TABLE memory_audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts TEXT NOT NULL,
            action TEXT NOT NULL,
            scope TEXT NOT NULL,
            target TEXT,
            counts TEXT NOT NULL,
            reason TEXT NOT NULL)"""
    )
    db.execute(
        "CREATE TRIGGER memory_audit_append_only BEFORE UPDATE ON memory_audit"
        " BEGIN SELECT RAISE(ABORT, 'memory_audit is append-only'); END"
    )
    db.execute(
        "CREATE TRIGGER memory_audit_no_delete BEFORE DELETE ON memory_audit"
        " BEGIN SELECT RAISE(ABORT, 'memory_audit is append-only'); END"
    )


MIGRATIONS = [
    Migration("cache_0001_pairs_sessions_state", _v1),
    Migration("cache_0002_tiers_profile_provenance", _v2),
]
MIGRATIONS_3 = [Migration("cache_0003_memory_audit", _v3)]
