"""The state DB's connection as the runtime uses it: `execute`, `atomic`, `conn`, `close`.

These four are all the runtime ever used of `sqlite_utils.Database`, and they are kept here with
its semantics, statement for statement (sqlite-utils 4.2's `Database.execute` and `atomic`): a
write outside a transaction is committed at once; `atomic()` is BEGIN … COMMIT, a SAVEPOINT
when nested, rolled back on any exception. sqlite-utils itself imports click, dateutil, pluggy,
tabulate and sqlite-fts4 at import (61 modules, ~3.6 MB resident, ~80 ms of every start) for
its table API and CLI, which the runtime never calls; tests and benchmarks still use it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

# statements that open or end a transaction themselves: never committed behind the caller
_CONTROL = frozenset({"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"})


def first_keyword(sql: str) -> str:
    """The statement's first keyword, upper-cased, past whitespace, `;`, a BOM and comments."""
    i, n = 0, len(sql)
    while i < n:
        if sql[i].isspace() or sql[i] in (";", "\ufeff"):
            i += 1
        elif sql.startswith("--", i):
            newline = sql.find("\n", i)
            i = n if newline == -1 else newline + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end == -1 else end + 2
        else:
            break
    start = i
    while i < n and (sql[i].isalpha() or sql[i] == "_"):
        i += 1
    return sql[start:i].upper()


class Database:
    """A `sqlite3.Connection` in the driver's default (legacy) transaction handling."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.execute("PRAGMA recursive_triggers=on;")

    def execute(
        self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> sqlite3.Cursor:
        """Run one statement. One that opened an implicit transaction (a write outside
        `atomic`) is committed at once; one that failed there is rolled back."""
        conn = self.conn
        was_in_transaction = conn.in_transaction
        try:
            cursor = conn.execute(sql) if parameters is None else conn.execute(sql, parameters)
        except Exception:
            if not was_in_transaction and conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if (
            not was_in_transaction
            and conn.in_transaction
            and cursor.description is None
            and first_keyword(sql) not in _CONTROL
        ):
            conn.execute("COMMIT")
        return cursor

    @contextlib.contextmanager
    def atomic(self) -> Iterator[Database]:
        """A transaction (a savepoint inside one): committed at the end of the block, rolled
        back when it raises."""
        conn = self.conn
        if conn.in_transaction:
            # one name for every level: SQLite resolves it to the most recent savepoint of that
            # name, and blocks nest; a new name each time is a new SQL text, parsed again
            savepoint = "a2a_sp"
            conn.execute(f"SAVEPOINT {savepoint};")
            try:
                yield self
            except BaseException:
                # a RAISE(ROLLBACK) trigger may have ended the whole transaction already
                if conn.in_transaction:
                    conn.execute(f"ROLLBACK TO SAVEPOINT {savepoint};")
                    conn.execute(f"RELEASE SAVEPOINT {savepoint};")
                raise
            else:
                conn.execute(f"RELEASE SAVEPOINT {savepoint};")
            return
        conn.execute("BEGIN")
        try:
            yield self
        except BaseException:
            self.rollback()
            raise
        else:
            try:
                conn.execute("COMMIT")
            except BaseException:
                self.rollback()
                raise

    def rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
