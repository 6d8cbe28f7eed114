"""Tables of the memory cache (migrations in order; never edit a shipped one, add a new one)."""

from __future__ import annotations

import json

from a2a_common.db import Database
from a2a_common.sqlite import Migration


def _v1(db: Database) -> None:
    sessions = db.table("sessions").create(
        {"session_id": str, "started_at": str, "last_turn_at": str, "summary": str},
        pk="session_id",
        not_null={"started_at", "last_turn_at", "summary"},
        defaults={"summary": ""},
    )
    sessions.create_index(["last_turn_at"], index_name="sessions_last_turn")
    # UNIQUE, a partial index: sqlite-utils' create() and create_index() cannot say them
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
    db.table("pairs").create_index(["created_at"], index_name="pairs_created")
    db.execute("CREATE INDEX pairs_status ON pairs (status) WHERE status = 'pending'")
    db.table("device_state").create({"key": str, "value": str}, pk="key", not_null={"value"})
    db.execute(  # a CHECK: raw SQL
        """CREATE TABLE sync_position (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            cursor TEXT NOT NULL,
            version TEXT NOT NULL)"""
    )
    db.table("sync_position").insert({"id": 1, "cursor": "", "version": ""})


def _v2(db: Database) -> None:
    """Every tier of SPEC §5.1 with provenance (JSON arrays of ids)."""
    pairs = db.table("pairs")
    pairs.add_column("expire_at", str)
    pairs.add_column("synced", int, not_null_default=0)
    # UNIQUE, CHECK, ON DELETE CASCADE, a DESC key: raw SQL
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


def _v3(db: Database) -> None:
    """Append-only audit of forgets, revocations and expiries: ids and counts, never text."""
    db.execute(  # AUTOINCREMENT and triggers: raw SQL
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


_TEXTS = (  # table, id column, text column(s), categories column, sensitive column
    ("pairs", "pair_id", "user_text || ' ' || assistant_text", "categories", "sensitive"),
    ("sessions", "session_id", "summary", "summary_categories", "summary_sensitive"),
    ("daily_summaries", "summary_id", "summary", "categories", "sensitive"),
    ("weekly_digests", "digest_id", "digest", "categories", "sensitive"),
)


def _label(
    db: Database,
    table: str,
    columns: tuple[str, str, str],
    row_id: str,
    names: list[str],
) -> None:
    """Write a row's categories and sensitive flag (default sensitive categories; a flag set
    before stays set)."""
    from cache.privacy import SENSITIVE_DEFAULT

    id_column, cats, flag = columns
    db.execute(
        f"UPDATE {table} SET {cats} = ?, {flag} = max({flag}, ?) WHERE {id_column} = ?",
        [
            json.dumps(names, ensure_ascii=False),
            int(bool(set(names) & set(SENSITIVE_DEFAULT))),
            row_id,
        ],
    )


def _v4(db: Database) -> None:
    """Categories on every text (SPEC §5.5): a JSON list of category names and a sensitive flag
    on pairs, session summaries, daily summaries and digests; profile items (which had one
    category and the flag) get the list too: their category and the lexicon's over key and value.
    Existing texts are labelled with the shipped lexicon; their sensitive flag uses the default
    sensitive categories (a stricter config only hides more at read time). A session summary
    carries the union of its pairs' categories. Sensitive texts without an expiry get the
    30-day cap (pairs from their creation, the rest from their last update)."""
    from cache.lexicon import categories_of
    from cache.privacy import SENSITIVE_MAX_DAYS

    for table, _id, _text, cats, flag in _TEXTS:
        db.table(table).add_column(cats, str, not_null_default="[]")
        db.table(table).add_column(flag, int, not_null_default=0)
    db.table("profile_items").add_column("categories", str, not_null_default="[]")
    db.table("pairs").create_index(["session_id"], index_name="pairs_session")
    item = ("item_id", "categories", "sensitive")
    for item_id, key, value, category in db.execute(
        "SELECT item_id, key, value, category FROM profile_items"
    ).fetchall():
        names = list(dict.fromkeys(c for c in [category, *categories_of([key, value])] if c))
        if names:
            _label(db, "profile_items", item, item_id, names)
    for table, id_column, text, cats, flag in _TEXTS:
        for row_id, body in db.execute(f"SELECT {id_column}, {text} FROM {table}").fetchall():
            if found := categories_of([body or ""]):
                _label(db, table, (id_column, cats, flag), row_id, found)
    for session_id, raw, pairs in db.execute(
        "SELECT s.session_id, s.summary_categories, (SELECT json_group_array(j.value) FROM"
        " pairs p, json_each(p.categories) j WHERE p.session_id = s.session_id) FROM sessions s"
    ).fetchall():
        names = list(dict.fromkeys([*json.loads(raw), *json.loads(pairs or "[]")]))
        if names != json.loads(raw):
            columns = ("session_id", "summary_categories", "summary_sensitive")
            _label(db, "sessions", columns, session_id, names)
    cap = f"'+{SENSITIVE_MAX_DAYS} days'"
    for table, since in (
        ("pairs", "created_at"),
        ("daily_summaries", "updated_at"),
        ("weekly_digests", "updated_at"),
        ("profile_items", "updated_at"),
    ):
        db.execute(
            f"UPDATE {table} SET expire_at = strftime('%Y-%m-%dT%H:%M:%fZ', {since}, {cap})"
            " WHERE sensitive = 1 AND expire_at IS NULL"
        )


def _v5(db: Database) -> None:
    """Memory that changes its mind (SPEC §5.4): when an item was confirmed, which rival value
    contests it, and the supersede links both ways. The states stay columns beside `status`
    (a contested item is still `confirmed`; a superseded one is a `candidate` with
    `superseded_by` set), so the status CHECK and the table stay as shipped: no rebuild, no
    foreign key juggling over `profile_evidence`. Items confirmed before this migration count
    as confirmed at their last update."""
    items = db.table("profile_items")
    for column in ("confirmed_at", "contested_by", "superseded_by", "superseded_at", "supersedes"):
        items.add_column(column, str)
    db.execute("UPDATE profile_items SET confirmed_at = updated_at WHERE status = 'confirmed'")
    evidence = db.table("profile_evidence")
    evidence.create_index(["item_id", "day"], index_name="profile_evidence_window")
    items.create_index(["key", "status"], index_name="profile_items_key")


def _v6(db: Database) -> None:
    """`device_state` keyed by `key` alone (WITHOUT ROWID): a heartbeat or a new active
    workflow rewrote two b-trees (rows and the key's index), now one (issue 23). WITHOUT ROWID:
    raw SQL (sqlite-utils' create() and transform() cannot make one)."""
    db.execute(
        """CREATE TABLE device_state_keyed (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL) WITHOUT ROWID"""
    )
    db.execute("INSERT INTO device_state_keyed (key, value) SELECT key, value FROM device_state")
    db.execute("DROP TABLE device_state")  # secure_delete: its freed pages are zeroed
    db.execute("ALTER TABLE device_state_keyed RENAME TO device_state")


def _indexes(db: Database, table: str) -> list[str]:
    rows = db.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
        [table],
    ).fetchall()
    return [str(r[0]) for r in rows]


def _with_person(db: Database, table: str, unique: tuple[str, str]) -> None:
    """Rebuild `table` with `person_id` (existing rows: the household's) and its UNIQUE
    constraint, `unique` = (old clause, new clause), now per person. The stored
    CREATE statement is rewritten (SQLite cannot drop a constraint in place); the rows are
    copied, the old table dropped (secure_delete zeroes its pages), its indexes made again."""
    (sql,) = db.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [table]
    ).fetchone()
    indexes = _indexes(db, table)
    columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})").fetchall()]
    body = sql[sql.index("(") + 1 : sql.rindex(")")]
    column = "person_id TEXT NOT NULL DEFAULT 'household'"
    old, new = unique
    assert body.count(old) == 1, (table, old)
    if new.startswith("UNIQUE"):  # a table constraint: the column goes before it
        body = body.replace(old, f"{column}, {new}")
    else:
        body = body.replace(old, new) + f", {column}"
    db.execute(f"CREATE TABLE {table}_people ({body})")
    names = ", ".join(columns)
    db.execute(f"INSERT INTO {table}_people ({names}) SELECT {names} FROM {table}")
    db.execute(f"DROP TABLE {table}")
    db.execute(f"ALTER TABLE {table}_people RENAME TO {table}")
    for index in indexes:
        db.execute(index)


def _v7(db: Database) -> None:
    """People in the household (SPEC §5.7): `person_id` on every text the device keeps —
    pairs, sessions, daily summaries, digests, profile items and their evidence. What was kept
    before is the household's; nothing is lost. A day's summary, a week's digest and a key's
    value are now unique per person (rebuilt tables: a constraint cannot change in place).
    `profile_evidence` refers to `profile_items` with ON DELETE CASCADE: its rows wait in a
    TEMP table (not in the state file) while the items are rebuilt, then come back."""
    for table in ("pairs", "sessions"):
        db.execute(f"ALTER TABLE {table} ADD COLUMN person_id TEXT NOT NULL DEFAULT 'household'")
    db.execute("CREATE INDEX pairs_person ON pairs (person_id, created_at)")
    db.execute("CREATE INDEX sessions_person ON sessions (person_id, last_turn_at)")
    _with_person(db, "daily_summaries", ("day TEXT NOT NULL UNIQUE", "day TEXT NOT NULL"))
    db.execute("CREATE UNIQUE INDEX daily_summaries_day ON daily_summaries (person_id, day)")
    _with_person(db, "weekly_digests", ("week TEXT NOT NULL UNIQUE", "week TEXT NOT NULL"))
    db.execute("CREATE UNIQUE INDEX weekly_digests_week ON weekly_digests (person_id, week)")
    evidence_sql = db.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'profile_evidence'"
    ).fetchone()[0]
    evidence_indexes = _indexes(db, "profile_evidence")
    db.execute("CREATE TEMP TABLE evidence_kept AS SELECT * FROM main.profile_evidence")
    db.execute("DROP TABLE profile_evidence")
    _with_person(db, "profile_items", ("UNIQUE (key, value)", "UNIQUE (person_id, key, value)"))
    db.execute(evidence_sql)
    db.execute(
        "ALTER TABLE profile_evidence ADD COLUMN person_id TEXT NOT NULL DEFAULT 'household'"
    )
    db.execute("INSERT INTO profile_evidence SELECT *, 'household' FROM temp.evidence_kept")
    db.execute("DROP TABLE temp.evidence_kept")
    for index in evidence_indexes:
        db.execute(index)
    db.execute("CREATE INDEX profile_items_person ON profile_items (person_id, key, status)")


def _v8(db: Database) -> None:
    """Two indexes no turn reads, written by every turn (issue 36: a WAL frame each per
    take-in): `pairs_created` (the snapshot reads a person's newest pairs from `pairs_person`;
    the listing of every pair and retention's sweep scan pairs anyway) and
    `sessions_last_turn` (the current session comes from `sessions_person`; the listing of
    every session and the sensitive-summary cap read the small sessions table whole)."""
    db.execute("DROP INDEX IF EXISTS pairs_created")
    db.execute("DROP INDEX IF EXISTS sessions_last_turn")


def _v9(db: Database) -> None:
    """`pairs_status`, the partial index of pending pairs (issue 36, bytes per turn): a turn
    added its entry at take-in and removed it at the answer, a WAL frame in each commit, for a
    read made once per start (the recovery of the turns a previous run never answered), which
    now scans the pairs (~5 ms at a year of 20,000 pairs). The snapshot's recent pairs come from
    `pairs_person` and leave pending ones out row by row, as before."""
    db.execute("DROP INDEX IF EXISTS pairs_status")


def _v10(db: Database) -> None:
    """`sessions_person` on (person, entered_at) instead of (person, last_turn_at) (issue 36,
    bytes per turn): every turn moved its session's entry in the index, a WAL frame in each
    take-in. `entered_at` is when the session last became its person's current one (opened,
    or taken up again while another was the latest) and stays as the session goes on: a turn
    that continues the latest session writes its row alone. The newest `entered_at` is the
    session of the newest `last_turn_at` (a turn into another session enters it), so the
    current session is read from the index as before; `last_turn_at` still says when the
    session's last turn came (the idle check, the listing). A DB made before: each session
    entered at its last turn."""
    db.execute("ALTER TABLE sessions ADD COLUMN entered_at TEXT NOT NULL DEFAULT ''")
    db.execute("UPDATE sessions SET entered_at = last_turn_at")
    db.execute("DROP INDEX IF EXISTS sessions_person")
    db.execute("CREATE INDEX sessions_person ON sessions (person_id, entered_at)")


MIGRATIONS = [
    Migration("cache_0001_pairs_sessions_state", _v1),
    Migration("cache_0002_tiers_profile_provenance", _v2),
]
MIGRATIONS_3 = [Migration("cache_0003_memory_audit", _v3)]
MIGRATIONS_4 = [Migration("cache_0004_text_categories", _v4)]
MIGRATIONS_5 = [Migration("cache_0005_memory_windows", _v5)]
MIGRATIONS_6 = [Migration("cache_0006_device_state_without_rowid", _v6)]
MIGRATIONS_7 = [Migration("cache_0007_people", _v7)]
MIGRATIONS_8 = [Migration("cache_0008_unread_indexes", _v8)]
MIGRATIONS_9 = [Migration("cache_0009_pending_unindexed", _v9)]
MIGRATIONS_10 = [Migration("cache_0010_sessions_entered", _v10)]
