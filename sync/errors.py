"""The replayer's own failures: what goes wrong in the sync loop that is not the cloud's error."""

from __future__ import annotations

from a2a_common.errors import EdgeError
from cloud_client.errors import CloudUnavailable


class SyncError(EdgeError):
    """Root of the sync package's errors."""


class ConflictLoop(SyncError, CloudUnavailable):
    """The cloud answered `version_conflict` to the same batch `conflicts` times in a row.

    Also a CloudUnavailable: to whoever drains the outbox (the replay loop, `a2a-edge sync
    replay` without a service) it means the same as an unreachable cloud — the writes stay and
    a later drain tries again."""

    def __init__(self, conflicts: int) -> None:
        super().__init__("the cloud keeps answering version_conflict")
        self.conflicts = conflicts


class NoProgress(SyncError, CloudUnavailable):
    """The cloud answered a sync request but settled none of its writes (`{"acked": []}`, a body
    that is not the contract, a redirect). Also a CloudUnavailable: the replayer backs off as
    if the cloud were away, and `a2a-edge sync replay` gives up after its tries."""
