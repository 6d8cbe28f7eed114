"""Read-only listings of pairs and sessions for `a2a-edge memory pairs|sessions` (the ids that
`memory forget --pair|--session` take), newest first, bounded by `limit`."""

from __future__ import annotations

import json
from typing import Any

from a2a_common.db import Database

PAIR_COLUMNS = (
    "pair_id",
    "session_id",
    "turn_id",
    "created_at",
    "status",
    "route_family",
    "workflow_id",
    "synced",
    "expire_at",
    "user_text",
    "person_id",
    "categories",  # SPEC 5.5: the privacy categories that keep it on the device or withhold it
)


def pairs(
    db: Database, limit: int, session_id: str | None = None, person: str | None = None
) -> list[dict[str, Any]]:
    """Newest first; only `session_id`'s, only `person`'s (SPEC §5.7) when given."""
    clauses = [(c, v) for c, v in (("session_id", session_id), ("person_id", person)) if v]
    where = ("WHERE " + " AND ".join(f"{c} = ?" for c, _ in clauses)) if clauses else ""
    params = [v for _, v in clauses]
    rows = db.execute(
        f"SELECT {', '.join(PAIR_COLUMNS)} FROM pairs {where}"
        " ORDER BY created_at DESC, pair_id DESC LIMIT ?",
        [*params, limit],
    ).fetchall()
    out = [dict(zip(PAIR_COLUMNS, row, strict=True)) for row in rows]
    for row in out:
        row["synced"] = bool(row["synced"])
        row["categories"] = json.loads(row["categories"] or "[]")
    return out


def sessions(db: Database, limit: int, person: str | None = None) -> list[dict[str, Any]]:
    where, params = ("WHERE s.person_id = ?", [person]) if person else ("", [])
    rows = db.execute(
        "SELECT s.session_id, s.started_at, s.last_turn_at, count(p.pair_id), s.summary != '',"
        f" s.person_id FROM sessions s LEFT JOIN pairs p ON p.session_id = s.session_id {where}"
        " GROUP BY s.session_id ORDER BY s.last_turn_at DESC, s.session_id DESC LIMIT ?",
        [*params, limit],
    ).fetchall()
    names = ("session_id", "started_at", "last_turn_at", "pairs", "has_summary", "person_id")
    out = [dict(zip(names, row, strict=True)) for row in rows]
    for row in out:
        row["has_summary"] = bool(row["has_summary"])
    return out
