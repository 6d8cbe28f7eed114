"""Forget, revoke and the retention sweep as the runtime (or the CLI without a service) runs
them: the cache's part, the sync outbox's part and the audit in one transaction; then a WAL
checkpoint so no page of the forgotten text lingers in the WAL file."""

from __future__ import annotations

import logging
import sqlite3
import threading
from contextlib import nullcontext
from typing import Any

import sqlite_utils

from a2a_common.clock import Clock
from cache.memory import Memory
from sync.outbox import SyncOutbox

log = logging.getLogger(__name__)


class MemoryOps:
    def __init__(
        self,
        *,
        db: sqlite_utils.Database,
        memory: Memory,
        sync_outbox: SyncOutbox,
        clock: Clock,
        checkpoint_lock: threading.Lock | None = None,
    ) -> None:
        self._db = db
        self._memory = memory
        self._sync = sync_outbox
        self._clock = clock
        # the service's background checkpointer holds it while it runs: a TRUNCATE that met
        # it mid-checkpoint would return busy and leave the WAL (and forgotten text) in place
        self._checkpoint_lock = checkpoint_lock

    def forget(self, scope: str, target: str | None, reason: str = "user") -> dict[str, int]:
        """Call inside the caller's transaction; `checkpoint()` after it commits."""
        forgetter = self._memory.forgetter
        gone = forgetter.forget(scope, target)
        summaries = gone.summaries + (forgetter.wipe_rest() if scope == "all" else 0)
        outbox = self._sync.drop_memory(
            pairs=gone.pairs,
            sessions=gone.sessions,
            items=gone.items,
            keys=gone.keys,
            everything=scope == "all",
        )
        self._sync.enqueue([*gone.writes, gone.tombstone()])
        removed = {
            "pairs": len(gone.pairs),
            "sessions": len(gone.sessions),
            "profile_items": len(gone.items),
            "summaries": summaries,
            "outbox": outbox,
        }
        forgetter.audit("forget", scope, target, removed, reason)
        log.info("forget %s %s: %s", scope, target or "-", removed)
        return removed

    def revoke(self, key: str, reason: str = "user") -> dict[str, Any]:
        """Call inside the caller's transaction."""
        forgetter = self._memory.forgetter
        items, write = forgetter.revoke(key)
        outbox = self._sync.drop_memory(pairs=[], sessions=[], items=items, keys=[])
        if write is not None:
            self._sync.enqueue([write])
        counts = {"profile_items": len(items), "outbox": outbox}
        forgetter.audit("revoke", "profile_key", key, counts, reason)
        log.info("revoke %s: %s", key, counts)
        return {"revoked": items, **counts}

    def checkpoint(self) -> bool:
        """Copy the WAL back and truncate it; True when it did."""
        try:
            with self._checkpoint_lock or nullcontext():
                busy, _log, _done = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:
            log.warning("WAL checkpoint after a forget failed: %s", exc)
            return False
        if busy:
            log.warning(
                "WAL checkpoint after a forget was blocked by a reader; old WAL pages stay until"
                " they are overwritten or a later forget truncates the WAL"
            )
        return not busy

    def sweep(self, limit: int = 500) -> dict[str, int]:
        """One bounded batch of retention (its own transaction); all zero when nothing is left."""
        latest = self._memory.store.latest_session()
        now = self._clock.now()
        current = self._memory.session_for(None, now) if latest else None
        with self._db.atomic():
            counts = self._memory.sweeper.sweep_batch(now, current, limit)
            if any(counts.values()):
                self._memory.forgetter.audit("expire", "retention", None, counts, "retention")
        return counts
