"""The state DB and its WAL are still the files the service opened (SPEC §6).

SQLite keeps writing through its open descriptors: after `rm state.db-wal`, or with another
file moved over `state.db`, every commit still succeeds — into an inode nobody will open again.
A restart then finds none of it. Only a look at the paths shows it: `(st_dev, st_ino)` of both,
taken when the service opened them, compared with what the paths name now. It is cheap (two
`os.stat`, a few µs), so it runs after every commit of the service, before that commit's
effects (acks, publishes, turn starts: `Commits(guard=…)`), and once a second in the
checkpointer's thread for a service that is idle.

Once lost, always lost: `check()` keeps answering the first reason, logs one ERROR line, and
calls the listeners once (the runtime stops with exit 1; systemd starts it again on the files
that are there now).

When `state.db` itself is gone or another file, the WAL at `state.db-wal` still holds the old
file's log, and the next start would read it as the new file's — SQLite's documented way to
corrupt a database ("mispairing a database and its journal"; SQLite itself leaves it there
when it sees the DB moved). It is moved aside to `state.db-wal.orphaned-<UTC time>Z`, kept for
whoever wants what it held — but it holds raw pages of the user's words, so it is one of the
copies a forget, retention and `storage.backup_keep_days` remove (edge/host/copies.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

Identity = tuple[int, int]  # (st_dev, st_ino)


def _identity(path: Path) -> Identity | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class StateFiles:
    def __init__(self, db_path: Path) -> None:
        self.db = db_path
        self.wal = db_path.with_name(db_path.name + "-wal")
        self._known: dict[Path, Identity | None] = {p: _identity(p) for p in (self.db, self.wal)}
        self._lost: str | None = None
        self.wal_removed = False  # the DB file is ours and only the WAL is gone
        self.db_gone = False  # state.db was removed or replaced
        self._listeners: list[Callable[[str], object]] = []
        self._lock = threading.Lock()

    def when_lost(self, fn: Callable[[str], object]) -> None:
        """`fn(reason)` once, from whichever thread noticed (the loop or the checkpointer's)."""
        self._listeners.append(fn)

    @property
    def lost(self) -> str | None:
        return self._lost

    def intact(self) -> bool:
        """The guard of the service's commits."""
        return self.check() is None

    def check(self) -> str | None:
        """None while both paths still name the files the service writes; else why not."""
        if self._lost is not None:
            return self._lost
        reason = self._look()
        if reason is None:
            return None
        with self._lock:
            if self._lost is not None:
                return self._lost
            self._lost = reason
        log.error("%s: stopping (exit 1) before acknowledging anything it could not keep", reason)
        if self.db_gone:
            self._set_aside_wal()
        for fn in self._listeners:
            try:
                fn(reason)
            except Exception:
                log.exception("a listener of the lost state files failed")
        return reason

    def _look(self) -> str | None:
        for path, known in self._known.items():
            try:
                now = _identity(path)
            except OSError as exc:
                return f"{path} cannot be looked at ({exc.strerror})"
            if known is None:  # not there when we started: whatever appears is SQLite's own
                self._known[path] = now
                continue
            if now is None:
                self.wal_removed = path == self.wal
                self.db_gone = path == self.db
                return f"{path} was removed while the service ran (it wrote inode {known[1]})"
            if now != known:
                self.db_gone = path == self.db
                return (
                    f"{path} was replaced while the service ran (it wrote inode {known[1]},"
                    f" the path now names inode {now[1]})"
                )
        return None

    def _set_aside_wal(self) -> None:
        """The old file's WAL, if it is still at its path, out of the next start's way."""
        known = self._known[self.wal]
        if known is None or _identity(self.wal) != known:
            return
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = self.wal.with_name(f"{self.wal.name}.orphaned-{stamp}")
        try:
            os.rename(self.wal, aside)
        except OSError as exc:
            log.error("could not move the old WAL aside (%s): the next start may misread it", exc)
            return
        log.warning("the WAL written for the old state.db was moved to %s", aside)
