"""One life cycle for the durable queues of the state DB: the MQTT outbox (`edge.store.outbound`),
the sync outbox (`sync.outbox`), the owed workflow reports (`edge.store.reports_owed`) and the
inbound dead letters (`edge.store.inbox`). Each also keeps its own methods; these are what they
share, and what `tests/queues/test_contract.py` checks of each, the same cases for all four.

- `put(item)` inside the caller's open transaction: a rollback leaves nothing; returns its id.
- `hand_out(limit)`: up to `limit` stored items, oldest first, with their ids; never one acked.
  An item handed out and not acked is handed out again by the next instance (a crash between
  the two loses nothing); within one instance a queue may hand it out again (the sync outbox,
  for the replayer's retries) or not (the MQTT outbox, once per process).
- `ack(ids)`: those items are done. They are never handed out again, and are physically gone
  at the latest after the next `reap()` and its commit (the sync outbox deletes them at once).
- `reap()`: delete what was acked, inside the caller's transaction (or one of its own); returns
  how many rows it deleted.
- `prune(before, limit)`: the queue's bounded cleanup, at most `limit` items enqueued before
  `before` (an `iso` time) that its own policy lets go; returns how many.
- `count()`: items stored and not yet reaped (handed out or not).

Ids are ordered: an id is larger than every id the same instance gave or handed out before,
also once the table was emptied, and larger than every id still stored when an instance starts.
Those that leave the process are never reused at all (the sync outbox's `write_id`, a report's
`request_id`, a dead letter's id in `a2a-edge inbox dead`). The MQTT outbox's row ids, which
never leave it, may be once a restart met an empty table: `mqtt_outbox` numbers its rows itself
since AUTOINCREMENT went (issue 23: a `sqlite_sequence` page written by every commit that sent).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

ItemT = TypeVar("ItemT")
IdT = TypeVar("IdT", int, str)


@dataclass(frozen=True)
class Handed(Generic[IdT, ItemT]):
    """An item as `hand_out` gives it: its id (what `ack` takes) and what was `put`."""

    id: IdT
    item: ItemT


class DurableQueue(Protocol[ItemT, IdT]):
    def put(self, item: ItemT) -> IdT:
        """Store `item`; call inside the caller's open transaction."""
        ...

    def hand_out(self, limit: int) -> list[Handed[IdT, ItemT]]:
        """Up to `limit` items not acked, oldest first."""
        ...

    def ack(self, ids: Iterable[IdT]) -> None:
        """These handed-out items are done; `reap()` deletes them."""
        ...

    def reap(self) -> int:
        """Delete the acked items (in the caller's transaction, or one of its own)."""
        ...

    def prune(self, before: str, limit: int) -> int:
        """At most `limit` items enqueued before `before` that the queue's policy lets go."""
        ...

    def count(self) -> int:
        """Items stored and not yet reaped."""
        ...
