"""The state DB's connection: `sqlite_utils.Database` (sqlite-utils 4.x), the product's storage
layer, as its design card asks (each dependency used for its job, no hand-written copy).

The runtime relies on its transaction semantics as sqlite-utils 4.2 defines them, unchanged: a
write through `execute` outside a transaction is committed at once (a failed one rolled back);
`atomic()` is BEGIN … COMMIT, a SAVEPOINT when nested, rolled back on any exception;
`PRAGMA recursive_triggers=on`. Migrations and read paths use its table API (`create`,
`create_index`, `add_column`, `rows_where`, `count_where`); `conn` is the `sqlite3.Connection`.

One thing differs, in `Database` below: a nested `atomic()` uses one savepoint name at every
level instead of a random one per block. SQLite resolves a name to the most recent savepoint,
so blocks nest the same; a new name is a new SQL text, compiled again and pushed into the
connection's statement cache (128 entries) in place of a hot statement of the runtime's: every
turn and callback nests one (edge/store/commits.py), ~8 µs more each with random names.
Plugins are never run on the runtime's connection (`execute_plugins=False`).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

import sqlite_utils

__all__ = ["Database"]

SAVEPOINT = "a2a_sp"


class Database(sqlite_utils.Database):
    """A `sqlite_utils.Database` over an open `sqlite3.Connection` in the driver's default
    (legacy) transaction handling."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn, execute_plugins=False)

    @contextlib.contextmanager
    def atomic(self) -> Iterator[Database]:
        """sqlite-utils' `atomic()` with one savepoint name for every nested level."""
        conn = self.conn
        if not conn.in_transaction:
            with super().atomic():
                yield self
            return
        conn.execute(f"SAVEPOINT {SAVEPOINT};")
        try:
            yield self
        except BaseException:
            # a RAISE(ROLLBACK) trigger may have ended the whole transaction already
            if conn.in_transaction:
                conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT};")
                conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT};")
            raise
        else:
            conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT};")
