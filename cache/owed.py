"""Turns still owed an answer whose pair a forget removed (SPEC §2.4: every turn whose id could
be read is answered; nothing acknowledged is lost).

A turn's pending pair is what the start's recovery answers from after a crash. A forget that
removes the pair while its answer waits on the cloud removes the words, not the obligation to
answer: the turn is kept here by id (its `turn_id` and the gone `pair_id`, never the text) in
the forget's own transaction, and leaves in the transaction that answers it — the cloud's
answer in the same run, or the next start's `error` `interrupted` after a crash.

Kept in `device_state` (one JSON object, `{turn_id: pair_id}`): empty but for the rare forget
that meets a turn in flight, and read only where a pair is found missing.
"""

from __future__ import annotations

import json

from a2a_common import jsonx
from a2a_common.db import Database

KEY = "turns_owed"


def owed(db: Database) -> dict[str, str]:
    """turn_id -> pair_id of the turns a forget left without their pair, not answered yet."""
    row = db.execute("SELECT value FROM device_state WHERE key = ?", [KEY]).fetchone()
    value = json.loads(row[0]) if row else {}
    return {str(t): str(p) for t, p in value.items()} if isinstance(value, dict) else {}


def keep(db: Database, pair_ids: list[str]) -> int:
    """Before the pairs are deleted (inside the forget's transaction): the pending ones among
    them stay owed by turn id. Returns how many were pending."""
    if not pair_ids:
        return 0
    marks = ",".join("?" * len(pair_ids))
    rows = db.execute(
        f"SELECT turn_id, pair_id FROM pairs WHERE status = 'pending' AND pair_id IN ({marks})",
        pair_ids,
    ).fetchall()
    if rows:
        _write(db, {**owed(db), **{str(t): str(p) for t, p in rows}})
    return len(rows)


def answered(db: Database, pair_id: str) -> None:
    """The turn of this (forgotten) pair is answered in the caller's transaction."""
    now = owed(db)
    left = {t: p for t, p in now.items() if p != pair_id}
    if len(left) != len(now):
        _write(db, left)


def _write(db: Database, value: dict[str, str]) -> None:
    if not value:
        db.execute("DELETE FROM device_state WHERE key = ?", [KEY])
        return
    db.execute(
        "INSERT INTO device_state (key, value) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [KEY, jsonx.dumps(dict(sorted(value.items())))],
    )
