"""The retention sweep (SPEC §5.5): synced pairs older than `memory.retention_days`, expired
pairs, summaries, digests and profile items, sensitive session summaries past the 30-day cap,
and session-scoped items and pairs of sessions that ended. Unsynced pairs are never pruned for
age; a pair whose own category gives it an expiry goes when it expires, synced or not (a
`share: false` pair is never synced, and the cap holds for it too; the caller drops any unsent
write of it). Each call does one bounded batch so a year of backlog never stalls the loop; the
caller repeats while it reports more."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime, timedelta

from a2a_common.clock import iso
from a2a_common.db import Database
from cache import owed
from cache.privacy import SENSITIVE_MAX_DAYS, PrivacyPolicy

Current = str | Collection[str] | None  # the sessions still going (one per person, SPEC 5.7)


def _live(current: Current) -> list[str]:
    if current is None:
        return []
    return [current] if isinstance(current, str) else sorted(current)


class Sweeper:
    def __init__(self, *, db: Database, retention_days: int, privacy: PrivacyPolicy) -> None:
        self._db = db
        self._retention = timedelta(days=retention_days)
        self._privacy = privacy
        self.expired_pairs: list[str] = []

    def set_privacy(self, privacy: PrivacyPolicy) -> None:
        self._privacy = privacy

    def _delete(self, table: str, key: str, where: str, params: list[object], limit: int) -> int:
        return len(self._delete_ids(table, key, where, params, limit))

    def _delete_ids(
        self, table: str, key: str, where: str, params: list[object], limit: int
    ) -> list[str]:
        ids = [
            r[0]
            for r in self._db.execute(
                f"SELECT {key} FROM {table} WHERE {where} LIMIT ?", [*params, limit]
            ).fetchall()
        ]
        if ids:
            if table == "pairs":  # a turn still waiting for its answer stays owed
                owed.keep(self._db, ids)
            self._db.execute(
                f"DELETE FROM {table} WHERE {key} IN ({','.join('?' * len(ids))})", ids
            )
        return ids

    def sweep_batch(
        self, now: datetime, current_session: Current, limit: int = 500
    ) -> dict[str, int]:
        """One batch, inside the caller's transaction; counts per tier (all zero: done). The
        ids of the pairs it deleted are in `expired_pairs` (for the outbox)."""
        stamp = iso(now)
        self.expired_pairs = self._delete_ids(
            "pairs",
            "pair_id",
            "(synced = 1 AND created_at < ?) OR expire_at < ?",
            [iso(now - self._retention), stamp],
            limit,
        )
        self.expired_pairs += self._session_pairs(current_session, limit)
        capped = self._db.execute(
            "UPDATE sessions SET summary = '' WHERE summary_sensitive = 1 AND summary != ''"
            " AND last_turn_at < ?",
            [iso(now - timedelta(days=SENSITIVE_MAX_DAYS))],
        ).rowcount
        counts = {
            "pairs": len(self.expired_pairs),
            "summaries": self._delete(
                "daily_summaries", "summary_id", "expire_at < ?", [stamp], limit
            )
            + self._delete("weekly_digests", "digest_id", "expire_at < ?", [stamp], limit)
            + int(capped),
            "profile_items": self._delete(
                "profile_items", "item_id", "expire_at < ?", [stamp], limit
            ),
        }
        counts["profile_items"] += self.end_sessions(current_session, limit)
        return counts

    def _session_pairs(self, current_session: Current, limit: int) -> list[str]:
        """Pairs of a `store: session` category whose session is over (each person's current
        session goes on)."""
        scoped = self._privacy.session_scoped()
        if not scoped:
            return []
        marks = ",".join("?" * len(scoped))
        live = _live(current_session)
        going = f"session_id NOT IN ({','.join('?' * len(live))}) AND " if live else ""
        return self._delete_ids(
            "pairs",
            "pair_id",
            f"{going}EXISTS (SELECT 1 FROM json_each(pairs.categories) WHERE value IN ({marks}))",
            [*live, *scoped],
            limit,
        )

    def end_sessions(self, current_session: Current, limit: int = 500) -> int:
        """`store: session` items whose sessions are all over."""
        scoped = [c for c, p in self._privacy.categories.items() if p.store == "session"]
        if not scoped:
            return 0
        rows = self._db.execute(
            f"SELECT item_id, source_session_ids FROM profile_items WHERE category IN"
            f" ({','.join('?' * len(scoped))}) LIMIT ?",
            [*scoped, limit * 4],
        ).fetchall()
        live = set(_live(current_session))
        gone = [item_id for item_id, raw in rows if not live & set(json.loads(raw))]
        gone = gone[:limit]
        if gone:
            self._db.execute(
                f"DELETE FROM profile_items WHERE item_id IN ({','.join('?' * len(gone))})", gone
            )
        return len(gone)
