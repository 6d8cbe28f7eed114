"""The part of a snapshot's view that outlasts a turn, kept between turns and read again only
when what it was read from may have changed.

A turn's view (`cache.view`) reads the recent pairs and the session summary, which every turn
changes, and the daily summaries, the weekly digest and the confirmed profile items, which
change only when those tables are written (a sync answer, a promotion, a forget, an expiry
sweep, a relabel) or as their rows expire. The latter (`Lasting`) is kept here, keyed on
everything its rows depend on, and is used again only while all of it still holds:
- no write to `profile_items` (a row confirmed before or after it), `daily_summaries` or
  `weekly_digests` on this connection since it was read: temporary triggers (this connection's
  own, nothing in the file) call a function that counts every inserted, updated or deleted
  row, whatever code path wrote it, committed or rolled back (a rollback is counted as a
  write: the next read reads again);
- no commit by another connection (`PRAGMA data_version`: the CLI, a restore);
- the same categories blocked and consented (the privacy policy and consent, read at every
  snapshot: a revoked consent changes the key at once), the same person (SPEC §5.7: one view
  per person, up to `KEPT` of them, so a household of a few people talking in turns still
  reads nothing again), the same row limits;
- no row of it has expired: `until` is the first `expire_at` among its rows (a row that was
  left out as expired stays out as time goes on; a clock set back reads again).
A view read inside an open transaction may hold writes that are not committed: it is used for
that read and not kept.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from a2a_common.db import Database
from cache.model import DailySummary, ProfileView

TABLES = ("profile_items", "daily_summaries", "weekly_digests")
# a view shows only confirmed profile items: a row that is not confirmed before the change nor
# after it (a candidate counting evidence, the most frequent write) changes no view
_WHEN = {
    ("profile_items", "INSERT"): "NEW.status = 'confirmed'",
    ("profile_items", "UPDATE"): "OLD.status = 'confirmed' OR NEW.status = 'confirmed'",
    ("profile_items", "DELETE"): "OLD.status = 'confirmed'",
}
_names = itertools.count(1)
KEPT = 16  # views kept at once (one per person and consent state)


@dataclass(frozen=True)
class Lasting:
    daily_summaries: tuple[DailySummary, ...]  # newest first
    weekly_digest: str
    profile_items: tuple[ProfileView, ...]  # most relevant first
    until: str | None  # the first `expire_at` (ISO) among these rows; None: none expires


Key = tuple[object, ...]


class WriteCount:
    """Rows written to `TABLES` through one connection (temporary triggers: nothing is added to
    the state file, and they see every statement, whichever code runs it). The triggers are
    created outside any transaction (one rolled back would drop them with it); until they
    are, `installed` is false and nothing is kept."""

    def __init__(self, db: Database) -> None:
        self.conn = db.conn
        self.rows = 0
        self.installed = False
        self._failed = False
        self._name = f"a2a_lasting_{next(_names)}"
        self.install()

    def install(self) -> bool:
        if self.installed or self._failed or self.conn.in_transaction:
            return self.installed
        name = self._name
        try:
            self.conn.create_function(name, 0, self._wrote)
            for table in TABLES:
                for op in ("INSERT", "UPDATE", "DELETE"):
                    when = _WHEN.get((table, op))
                    self.conn.execute(
                        f"CREATE TEMP TRIGGER IF NOT EXISTS {name}_{table}_{op.lower()}"
                        f" AFTER {op} ON main.{table}{f' WHEN {when}' if when else ''}"
                        f" BEGIN SELECT {name}(); END"
                    )
        except sqlite3.Error:  # e.g. a DB without these tables: nothing is ever kept
            self._failed = True
            return False
        self.installed = True
        return True

    def _wrote(self) -> None:
        self.rows += 1


class LastingCache:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._count = WriteCount(db)
        self._kept: dict[Key, tuple[Key, str, Lasting]] = {}  # key -> (state, read at, lasting)

    def _state(self) -> Key:
        conn = self._db.conn
        if conn is not self._count.conn:  # another connection under the same wrapper
            self._count = WriteCount(self._db)
            self._kept = {}
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        return (self._count.rows, version)

    def get(self, key: Key, stamp: str, read: Callable[[], Lasting]) -> Lasting:
        """The lasting view for `key` at `stamp` (ISO, as `expire_at` is compared), kept or
        `read()` again."""
        state = self._state()
        kept = self._kept.get(key)
        if kept is not None and self._count.installed:
            kept_state, since, lasting = kept
            live = lasting.until is None or lasting.until > stamp
            if kept_state == state and since <= stamp and live:
                return lasting
        lasting = read()
        # kept only when committed, and only if nothing was written while it was read
        quiet = not self._db.conn.in_transaction and self._state() == state
        if quiet and self._count.install():
            self._kept.pop(key, None)
            self._kept[key] = (state, stamp, lasting)
            while len(self._kept) > KEPT:
                del self._kept[next(iter(self._kept))]
        else:
            self._kept.pop(key, None)
        return lasting

    def clear(self) -> None:
        self._kept = {}
