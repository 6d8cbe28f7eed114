"""The retention sweep (SPEC §5.5): synced pairs older than `memory.retention_days`, expired
summaries, digests and profile items, and session-scoped items of sessions that ended. Unsynced
pairs are never pruned. Each call does one bounded batch so a year of backlog never stalls the
loop; the caller repeats while it reports more."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import sqlite_utils

from a2a_common.clock import iso
from cache.privacy import PrivacyPolicy


class Sweeper:
    def __init__(
        self, *, db: sqlite_utils.Database, retention_days: int, privacy: PrivacyPolicy
    ) -> None:
        self._db = db
        self._retention = timedelta(days=retention_days)
        self._privacy = privacy

    def set_privacy(self, privacy: PrivacyPolicy) -> None:
        self._privacy = privacy

    def _delete(self, table: str, key: str, where: str, params: list[object], limit: int) -> int:
        ids = [
            r[0]
            for r in self._db.execute(
                f"SELECT {key} FROM {table} WHERE {where} LIMIT ?", [*params, limit]
            ).fetchall()
        ]
        if ids:
            self._db.execute(
                f"DELETE FROM {table} WHERE {key} IN ({','.join('?' * len(ids))})", ids
            )
        return len(ids)

    def sweep_batch(
        self, now: datetime, current_session: str | None, limit: int = 500
    ) -> dict[str, int]:
        """One batch, inside the caller's transaction; counts per tier (all zero: done)."""
        stamp = iso(now)
        counts = {
            "pairs": self._delete(
                "pairs",
                "pair_id",
                "synced = 1 AND (created_at < ? OR expire_at < ?)",
                [iso(now - self._retention), stamp],
                limit,
            ),
            "summaries": self._delete(
                "daily_summaries", "summary_id", "expire_at < ?", [stamp], limit
            )
            + self._delete("weekly_digests", "digest_id", "expire_at < ?", [stamp], limit),
            "profile_items": self._delete(
                "profile_items", "item_id", "expire_at < ?", [stamp], limit
            ),
        }
        counts["profile_items"] += self.end_sessions(current_session, limit)
        return counts

    def end_sessions(self, current_session: str | None, limit: int = 500) -> int:
        """`store: session` items whose sessions are all over."""
        scoped = [c for c, p in self._privacy.categories.items() if p.store == "session"]
        if not scoped:
            return 0
        rows = self._db.execute(
            f"SELECT item_id, source_session_ids FROM profile_items WHERE category IN"
            f" ({','.join('?' * len(scoped))}) LIMIT ?",
            [*scoped, limit * 4],
        ).fetchall()
        gone = [item_id for item_id, raw in rows if current_session not in json.loads(raw)]
        gone = gone[:limit]
        if gone:
            self._db.execute(
                f"DELETE FROM profile_items WHERE item_id IN ({','.join('?' * len(gone))})", gone
            )
        return len(gone)
