"""What a forget of some turns forgets in the workflows too (SPEC 5.5): the words said in those
turns, read before the memory's forget deletes them, so the TaskManager can find the workflows
quoting a fragment of them (taskmanager/store.py `forget_words`)."""

from __future__ import annotations

from a2a_common.db import Database

MAX_TURNS = 500  # one IN list per this many turns


def said_in(db: Database, turn_ids: list[str]) -> list[str]:
    """The user's texts of these turns' pairs (never logged)."""
    texts: list[str] = []
    for start in range(0, len(turn_ids), MAX_TURNS):
        chunk = turn_ids[start : start + MAX_TURNS]
        rows = db.execute(
            f"SELECT user_text FROM pairs WHERE turn_id IN ({','.join('?' * len(chunk))})"
            " AND user_text IS NOT NULL AND user_text != ''",
            chunk,
        ).fetchall()
        texts += [str(text) for (text,) in rows]
    return texts
