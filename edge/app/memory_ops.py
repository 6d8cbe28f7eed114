"""Forget, revoke and the retention sweep as the app runs them: the cache's part, the sync
outbox's part and the audit in the caller's unit of work (the app truncates the WAL after a
forget commits, so no page of the forgotten text lingers in the WAL file). The copies of the
state DB beside it (pre-migration backups, set-aside WALs: edge/host/copies.py) go with a
forget, and with a retention pass that removed anything (SPEC §5.5)."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from a2a_common.clock import Clock
from cache import Memory
from edge.host.copies import Copies
from edge.store.commits import AfterCommit, run_now
from sync import SyncOutbox

log = logging.getLogger(__name__)


class MemoryOps:
    def __init__(
        self,
        *,
        memory: Memory,
        sync_outbox: SyncOutbox,
        clock: Clock,
        after_commit: AfterCommit = run_now,
        copies: Copies | None = None,
    ) -> None:
        self._after_commit = after_commit  # what it logs is said once its unit committed
        self._copies = copies
        self._memory = memory
        self._sync = sync_outbox
        self._clock = clock

    def forget(
        self, scope: str, target: str | None, reason: str = "user", *, with_sources: bool = True
    ) -> dict[str, int]:
        """Call inside the caller's unit of work; truncate the WAL after it commits.
        `with_sources` (profile keys): forget the pairs the key came from too (SPEC §5.5)."""
        forgetter = self._memory.forgetter
        gone = forgetter.forget(scope, target, with_sources=with_sources)
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
        if self._copies is not None:  # before it returns: no copy holds what it forgot
            self._copies.forgotten()
        self._after_commit(partial(log.info, "forget %s %s: %s", scope, target or "-", removed))
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
        self._after_commit(partial(log.info, "revoke %s: %s", key, counts))
        return {"revoked": items, **counts}

    def sweep(self, limit: int = 500) -> dict[str, int]:
        """One bounded batch of retention, inside the caller's unit of work; all zero when
        nothing is left."""
        now = self._clock.now()
        current = self._memory.current_sessions(now)  # each person's, going on (SPEC 5.7)
        sweeper = self._memory.sweeper
        counts = sweeper.sweep_batch(now, current, limit)
        if sweeper.expired_pairs:  # an expired pair's unsent write must not outlive it
            counts["outbox"] = self._sync.drop_memory(
                pairs=sweeper.expired_pairs, sessions=[], items=[], keys=[]
            )
        if any(counts.values()):
            self._memory.forgetter.audit("expire", "retention", None, counts, "retention")
        return counts

    def copies_after_retention(self, removed_anything: bool) -> None:
        """After a retention pass (memory, dead letters, marks): the copies of the state DB
        that hold what it removed, or that are past `storage.backup_keep_days`, go."""
        if self._copies is not None:
            self._copies.outlived(removed_anything)
