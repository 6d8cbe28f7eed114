"""The one writer's units of work, with effects that wait for the commit.

`atomic()` opens a transaction, or a savepoint inside the one already open: the runtime takes a
batch of inbound messages in one transaction (group commit: one fsync for the batch), each
message in a savepoint of its own so a refused one rolls back alone. `after_commit(fn)` runs `fn`
once the outermost transaction has committed (at once when none is open) and never when the
part that registered it rolled back: inbound messages are acknowledged and turns started only
for what is on disk. `on_commit`, given once where the graph is built, runs after every
outermost commit (it hands the committed MQTT outbox rows to the broker) and before the other
effects: the rows the commit made (a dependant's command, a turn's answer) reach the socket first,
and the acks, counters, reports and wake-ups follow (issue 36: the critical path). An effect that
must come before anything is sent is registered with `before_send(fn)` (a forget's WAL
truncation: its answer goes out once no byte of the forgotten text is left, SPEC §5.5).

This is also the one place storage errors are translated: a `sqlite3.Error` leaving a unit of
work becomes `StorageUnavailable` (retry later), `StorageCorrupt` (stop) or `StorageError` (a
bug), raised from it (`a2a_common.sqlite.storage_error`), so callers never catch sqlite3.

The outermost transaction is `BEGIN IMMEDIATE`: it takes the write lock before it reads, and
waits in the busy handler while another connection holds it (a RESTART or TRUNCATE checkpoint
does). A deferred `BEGIN` that has read and then writes cannot wait there (SQLite returns
SQLITE_BUSY at once to avoid a deadlock): that is a "database is locked" a checkpoint causes.
`gate` is entered around each outermost transaction: the checkpointer's RESTART goes between
two units of work instead of waiting for a gap a busy writer never leaves
(`edge/host/checkpointer.py`).
`guard` runs after each outermost commit, before its effects: False (the state files are no
longer the ones written, `edge/host/statefiles.py`) drops the effects — nothing that commit did is
acknowledged or sent.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from a2a_common.db import Database
from a2a_common.sqlite import StorageUnavailable, storage_error

log = logging.getLogger(__name__)
# SQLite rolls a whole transaction back on some errors inside it (SQLITE_FULL among them): what
# was applied in it before is gone too, so the unit is held and tried again, not committed
ROLLED_BACK = "the state DB rolled the transaction back (disk or DB size cap full)"


AfterCommit = Callable[[Callable[[], object]], None]


def run_now(fn: Callable[[], object]) -> None:
    """An `AfterCommit` for code that runs with no unit of work around it."""
    fn()


class Commits:
    def __init__(
        self,
        db: Database,
        *,
        on_commit: Callable[[], object] = lambda: None,
        gate: Callable[[], AbstractContextManager[object]] = nullcontext,
        guard: Callable[[], bool] | None = None,
    ) -> None:
        self._db = db
        self._on_commit = on_commit
        self._gate = gate
        self._guard = guard
        # per open level: its effects, each (runs before the send, fn)
        self._levels: list[list[tuple[bool, Callable[[], object]]]] = []

    @contextmanager
    def atomic(self) -> Iterator[None]:
        nested = bool(self._levels)
        self._levels.append([])
        try:
            with self._transaction(nested):
                yield
        except sqlite3.Error as exc:
            self._levels.pop()  # rolled back: what it registered never happens
            raise storage_error(exc) from exc
        except BaseException:
            self._levels.pop()
            raise
        effects = self._levels.pop()
        if self._levels:
            self._levels[-1].extend(effects)
            return
        if self._guard is not None and not self._guard():
            return
        first = [fn for before, fn in effects if before]
        then = [fn for before, fn in effects if not before]
        for fn in (*first, self._on_commit, *then):
            try:
                fn()
            except Exception:  # the commit stands; one failed effect must not skip the rest
                log.exception("an effect after a commit failed")

    @contextmanager
    def _transaction(self, nested: bool) -> Iterator[None]:
        conn = self._db.conn
        if nested and not conn.in_transaction:
            raise StorageUnavailable(ROLLED_BACK)  # the outer one is gone: it must go whole
        if conn.in_transaction:
            with self._db.atomic():  # a savepoint
                yield
            return
        with self._gate():
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                if not conn.in_transaction:
                    raise StorageUnavailable(ROLLED_BACK)
                conn.execute("COMMIT")
            except BaseException:
                conn.rollback()  # a no-op when the error already ended the transaction
                raise

    def after_commit(self, fn: Callable[[], object]) -> None:
        """`fn` once the outermost transaction committed, after its rows were handed to the
        broker (`on_commit`); at once when none is open."""
        if self._levels:
            self._levels[-1].append((False, fn))
        else:
            fn()

    def before_send(self, fn: Callable[[], object]) -> None:
        """`after_commit`, but before the commit's rows are handed to the broker."""
        if self._levels:
            self._levels[-1].append((True, fn))
        else:
            fn()

    @property
    def open(self) -> bool:
        return bool(self._levels)
