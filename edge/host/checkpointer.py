"""WAL checkpoints off the loop, and a WAL that stays within `storage.max_wal_mb` (SPEC §6).

SQLite's automatic checkpoint runs inside whichever COMMIT pushes the WAL past 1000 pages: that
commit copies the pages back and, with `synchronous=FULL`, fsyncs the database file — tens of
milliseconds on the loop every few dozen turns. The service turns it off on its writing
connection (`wal_autocheckpoint=0`) and checkpoints here instead, in a thread of its own on a
connection of its own (sqlite releases the GIL while it works). Durability is unchanged: a
commit is durable once it is in the WAL.

Pages are copied back only once the WAL is past `restart_at` (a quarter of the bound: 4 MB by
default, the cadence of SQLite's own automatic checkpoint, 1,000 pages): the pages a run of
commits keeps rewriting (the outbox's, the inbox's, an index's last leaf) go into the DB file
once for all of them. A copy every second, as before, wrote each unit's pages a second time
when turns come seconds apart — a third of a spoken turn's bytes (issue 23, `bench.disk`).
A commit is durable once it is in the WAL, so this changes what is written, not what is kept.

Copying pages back is not enough to bound the file. A PASSIVE checkpoint never blocks the
writer, and under a sustained burst the writer appends while it copies, so the log is never
wholly copied when the next write begins — and only then does SQLite start the log again from
the beginning. The file only grew (1,500 turns: 84 MB for a 0.8 MB DB). So the WAL's size is
looked at every `poll_s` and after each unit of work: past `restart_at` (a quarter of the
bound) a PASSIVE pass copies what it can without any lock, then `wal_checkpoint(RESTART)`
copies the few frames written meanwhile and waits until no reader uses the log, so that the
next write starts it from the beginning; `journal_size_limit` (set on the writer to
`restart_at`) trims the file at that write's commit. A WAL left large with no write to follow
(idle after a burst) gets `TRUNCATE` instead.

RESTART and TRUNCATE take the writer's lock while they run. A writer that wanted it in a
sustained burst always had it first: SQLite's busy handler polls, and the loop began its next
unit before the checkpointer's next poll, so RESTART never ran and the WAL grew as before. So
they go through a gate (`WriteGate`): the checkpointer waits there for the unit of work in
progress to end, and the next unit waits (`Commits(gate=…)`) until the RESTART is done — a few
frames' copy and its fsyncs. The writer's transactions are also `BEGIN IMMEDIATE`
(`edge/store/commits.py`): a writer that meets the lock waits in its busy handler rather than
failing with "database is locked". Here the busy timeout is `BUSY_MS`, which bounds how long a
reader is waited for while the writer is held; a checkpoint that could not finish is tried again
later (backing off to 1 s), never waited for.

A reader holding an old snapshot pins the log: no checkpoint may copy past it nor restart the
log, and the WAL grows while it lasts — short of stalling the writer, nothing bounds that. The
project's own readers (CLI, console, metrics) hold none longer than a statement: they read
through autocommit statements into lists and close the DB before they print (SPEC §6: never
longer than 1 s). So a checkpoint kept from finishing for `REPORT_AFTER_S` is a reader outside
the project: it is reported — a WARNING once per episode naming `storage.max_wal_mb`,
`problem()` (the service is `degraded` in STATUS=, the retained status and `a2a-edge status`),
`wal_blocked_s` in the heartbeat — and the bound is restored within a poll or two of the
reader's end (the periodic pass keeps trying while it is blocked).

After a forget (`truncate()`), no page of the forgotten text may stay in the WAL: a TRUNCATE
is owed until one succeeds, retried here (`wal_residue` in `health()`, and the STATUS= line)
— never on the loop, which a reader would have stalled for the whole busy timeout. Without the
thread (the CLI when no service runs) `truncate()` does it at once.

A checkpoint that fails for want of space or on an I/O error (SQLITE_FULL, SQLITE_IOERR, …: any
error but SQLITE_BUSY/LOCKED) is not a reader: it is tried again backing off from `FAIL_MIN_S`
to `FAIL_MAX_S` (a full disk stays full for a while; 20 lines a second helped no one), its log
lines are rate-limited (`RepeatLimiter`: `FAIL_LINES` a `FAIL_WINDOW_S`, the rest counted), a
reader pin reported before is dropped (the reader may be long gone), and `problem()` names the
failure instead (`wal_error` in the heartbeat and `a2a-edge status`) until a checkpoint succeeds
again — said once at INFO.

Each second the thread also checks that the state files are still the ones the service writes
(`edge/host/statefiles.py`); when only the WAL was removed it copies the removed WAL's frames (the
descriptor still reads them) into `state.db` before the service stops, so nothing acknowledged
is lost.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from edge.host.log import RepeatLimiter
from edge.host.statefiles import StateFiles

log = logging.getLogger(__name__)

EVERY_S = 1.0  # the state files' check (and a pinned log's) this often
POLL_S = 0.05  # the WAL file's size is looked at this often
BUSY_MS = 20  # how long a RESTART/TRUNCATE here may wait (and so hold the writer)
MAX_BACKOFF_S = 1.0  # retries of a RESTART/TRUNCATE that came back busy
REPORT_AFTER_S = 1.0  # a checkpoint kept from finishing this long is a blocked one
RESCUE_BUSY_MS = 2000  # the copy of a removed WAL before the service stops
FAIL_MIN_S, FAIL_MAX_S = 0.5, 5.0  # retries of a checkpoint that failed (a full disk, I/O)
FAIL_LINES, FAIL_WINDOW_S = 2, 60.0  # its WARNING lines: at most this many a window

GATE_WAIT_S = 1.0  # the longest the checkpointer waits for a unit of work to end
HOLD_S = 0.5  # the longest a unit waits for the checkpointer once the WAL is past `hold_at`

Mode = Literal["PASSIVE", "RESTART", "TRUNCATE", "FULL"]


class WriteGate:
    """Turns between the writer's units of work and the checkpoints that hold its lock: a
    checkpoint waiting here goes before the next unit (SQLite's own lock has no queue).
    `written` runs after each unit (the checkpointer looks at the WAL's size)."""

    def __init__(self, written: Callable[[], object] = lambda: None) -> None:
        self._cond = threading.Condition()
        self._writing = False
        self._checkpointing = False
        self._held_until = 0.0  # units wait for the checkpointer until then (monotonic)
        self._written = written

    def hold(self, timeout_s: float = HOLD_S) -> None:
        """The next unit waits until `release()` (the checkpointer's pass) or `timeout_s`."""
        with self._cond:
            self._held_until = time.monotonic() + timeout_s

    def release(self) -> None:
        with self._cond:
            if self._held_until:
                self._held_until = 0.0
                self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._cond:
            while True:
                held_s = self._held_until - time.monotonic()
                if not (self._checkpointing or held_s > 0):
                    break
                self._cond.wait(None if self._checkpointing else held_s)
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()
            self._written()

    @contextmanager
    def checkpointing(self, timeout_s: float = GATE_WAIT_S) -> Iterator[bool]:
        """Yields False when the unit in progress did not end within `timeout_s`."""
        with self._cond:
            self._checkpointing = True
            free = self._cond.wait_for(lambda: not self._writing, timeout_s)
        try:
            yield free
        finally:
            with self._cond:
                self._checkpointing = False
                self._cond.notify_all()


def hold_at(max_wal_bytes: int) -> int:
    """The WAL size past which units of work wait for the checkpointer (`HOLD_S` at most)."""
    return max(2 * restart_at(max_wal_bytes), max_wal_bytes // 2)


def restart_at(max_wal_bytes: int) -> int:
    """The WAL size past which the log is restarted; also the writer's `journal_size_limit`.
    A quarter of the bound leaves three quarters for what is written before the restart."""
    return max(64 * 1024, max_wal_bytes // 4)


class Checkpointer:
    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_ms: int,
        max_wal_bytes: int = 16 * 1024 * 1024,
        synchronous: str = "FULL",
        files: StateFiles | None = None,
        every_s: float = EVERY_S,
        poll_s: float = POLL_S,
    ) -> None:
        self._path = path
        self._wal = path.with_name(path.name + "-wal")
        self._busy_ms = busy_timeout_ms  # without the thread: `truncate()` may wait this long
        self._synchronous = synchronous
        self.max_wal_bytes = max_wal_bytes
        self.restart_at = restart_at(max_wal_bytes)
        self.hold_at = hold_at(max_wal_bytes)
        self.files = files
        self._every_s = every_s
        self._poll_s = poll_s
        self._conn: sqlite3.Connection | None = None
        self._timeout = -1  # the connection's busy timeout as last set
        self.lock = threading.Lock()  # held while a checkpoint runs
        self.gate = WriteGate(self._written)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._wanted = self._truncated = 0  # forgets asked for, forgets whose TRUNCATE is done
        self._retry_at = 0.0
        self._backoff_s = 0.0
        # when the last RESTART was, and the WAL's (size, mtime) right after it
        self._restarted: tuple[float, tuple[int, int] | None] | None = None
        self._blocked_since: float | None = None
        self._reported = False
        self._rescued = False
        # a checkpoint failing for want of space or on I/O (not a reader): its error, since when
        self._failing: tuple[str, float] | None = None
        self._fail_backoff_s = 0.0
        self._fail_retry_at = 0.0
        self._fails = 0  # checkpoints that failed in this episode
        self._said = RepeatLimiter(log, FAIL_LINES, FAIL_WINDOW_S, time.monotonic)
        self.wal_bytes = 0
        self.runs = self.restarts = self.truncates = 0

    # --- the loop's side --------------------------------------------------------------------
    async def run(self) -> None:
        """The thread for the service's life; cancelled at shutdown."""
        self.start()
        try:
            await asyncio.Event().wait()
        finally:
            self.close()

    def start(self) -> None:
        self._busy_ms = BUSY_MS
        # the WAL is opened now, while it is the service's: a connection first opened after
        # `rm state.db-wal` would make a new, empty one and could copy nothing back
        with self.lock:
            self._connection().execute("SELECT count(*) FROM sqlite_master").fetchone()
        self._thread = threading.Thread(target=self._work, name="wal-checkpointer", daemon=True)
        self._thread.start()

    def truncate(self) -> bool:
        """After a forget: a TRUNCATE is owed. With the thread it is queued there (never
        blocks the caller; retried until it succeeds) and this returns False; without it (the
        CLI) it runs now, True when it did."""
        self._wanted += 1
        if self._thread is not None:
            if self._truncate_now():
                return True
            self._wake.set()
            return False
        if self._settle_residue():
            return True
        log.warning(
            "the WAL could not be truncated after a forget (a reader holds an old snapshot):"
            " forgotten pages stay in it until a later checkpoint truncates it"
        )
        return False

    def _truncate_now(self) -> bool:
        """One TRUNCATE that does not wait, from the caller (the loop, between its units: the
        forget's effects run before its answer is handed to the broker), so when no reader
        pins the log the answer goes out after no byte of the forgotten text is left in the
        WAL or the DB file (SPEC §5.5). Busy (a reader): False, and the thread does it."""
        wanted = self._wanted
        try:
            with self.gate.checkpointing(0) as free:
                busy = self._checkpoint("TRUNCATE", 0)[0] if free else 1
        except sqlite3.Error as exc:
            log.debug("a forget's TRUNCATE left to the checkpointer's thread: %s", exc)
            return False
        if busy:
            return False
        self._truncated = max(self._truncated, wanted)
        self.truncates += 1
        self.wal_bytes = self._wal_size()
        return True

    def intact(self) -> bool:
        """The guard of the service's commits: its state files are still the ones it writes."""
        return self.files is None or self.files.intact()

    def _written(self) -> None:
        """After each unit of work (loop thread): past `restart_at` the thread is woken at once
        rather than at its next poll — a burst writes a poll's worth of WAL in 50 ms, which
        took the WAL past a 1 MB bound in 1,000 turns. One stat, ~2 µs. Past `hold_at` the next
        unit waits for the thread's pass (`HOLD_S` at most): on a slow disk the writer outran
        the PASSIVE copy and the WAL passed a 1 MB bound (1.09 MB in CI). While a reader blocks
        the checkpoint, nothing is held and the poll is often enough."""
        watching = self._thread is not None and self._blocked_since is None
        watching = watching and self._failing is None  # failing: no unit waits for a retry
        size = self._wal_size() if watching else 0
        if size > self.restart_at:
            if size > self.hold_at:
                self.gate.hold()
            self._wake.set()

    @property
    def residue(self) -> bool:
        """A forget's pages may still be in the WAL file."""
        return self._truncated < self._wanted

    def blocked_s(self) -> float | None:
        since = self._blocked_since
        if since is None or time.monotonic() - since < REPORT_AFTER_S:
            return None
        return round(time.monotonic() - since, 1)

    def health(self) -> dict[str, Any]:
        """For the heartbeat (`a2a-edge status`)."""
        return {
            "wal_bytes": self.wal_bytes,
            "wal_residue": self.residue,
            "wal_blocked_s": self.blocked_s(),
            "wal_error": self._failing[0] if self._failing else None,
        }

    def note(self) -> str:
        """What the STATUS= line should say of the WAL besides `problem()`; empty when all is
        well."""
        if self.residue:
            return "; forgotten data still in the WAL, retrying"
        return ""

    def problem(self) -> str | None:
        """A reader outside the service pins the log (SPEC §6): the service is degraded. The
        text stays the same for the whole episode (a changed problem re-publishes the retained
        status); how long and how large are `wal_blocked_s` and `wal_bytes`."""
        failing = self._failing
        if failing is not None:
            return (
                f"WAL checkpoints fail ({failing[0]}): the WAL may grow past its bound"
                f" (storage.max_wal_mb = {self.max_wal_bytes / 2**20:g}) until storage is back"
            )
        if self.blocked_s() is None:
            return None
        return (
            "WAL checkpoints blocked by a reader outside the service: the WAL may grow past"
            f" its bound (storage.max_wal_mb = {self.max_wal_bytes / 2**20:g}) until it ends"
        )

    def close(self) -> None:
        """Stop the thread (waits for a checkpoint still running) and close the connection."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self.gate.release()
        if self.files is not None and self.files.wal_removed:
            self._rescue()
        elif self.residue and thread is not None:
            self._settle_residue()  # a last try; the writer's close removes the WAL anyway
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # --- the thread -------------------------------------------------------------------------
    def _work(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            self._wake.wait(self._poll_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            now = time.monotonic()
            periodic = now >= next_tick
            if periodic:
                next_tick = now + self._every_s
                if self.files is not None and self.files.check() is not None:
                    if self.files.wal_removed:
                        self._rescue()
                    return  # the service stops; no checkpoint into files nobody will read
            if self._failing is not None and now < self._fail_retry_at:
                self.gate.release()  # backing off after a failure (a full disk, I/O): no unit waits
                continue
            try:
                self._tick(now, periodic)
            except sqlite3.Error as exc:
                if _busy(exc):
                    log.debug("WAL checkpoint busy (tried again in %gs): %s", self._poll_s, exc)
                else:
                    self._failed(exc, now)
            except Exception:  # the thread must outlive a bug in one tick
                log.exception("WAL checkpoint failed")
            finally:
                self.gate.release()

    def _tick(self, now: float, periodic: bool) -> None:
        self.wal_bytes = self._wal_size()
        over = self.wal_bytes > self.restart_at
        residue = self.residue
        # copying back a WAL under `restart_at` would only write its pages twice (issue 23)
        pinned = periodic and self._blocked_since is not None
        if not (over or residue or pinned or self._failing is not None):
            return
        busy, frames, copied = self._checkpoint("PASSIVE")
        self.runs += 1
        self._recovered(now)
        if busy:  # another checkpoint (a closing connection's) is running
            return
        if copied < frames:  # a reader's snapshot pins the log: RESTART could only wait
            self._blocked(now)
            return
        if not (over or residue):
            self._unblocked()
            return
        if now < self._retry_at:
            return
        if residue:
            self._settle_residue()
        elif self._restarted is not None and self._restarted[1] == self._stamp():
            # restarted, no write since: the next one starts the log over and trims the file;
            # if none comes (idle after a burst) the file is trimmed here a second later
            if now - self._restarted[0] >= self._every_s:
                self._finish("TRUNCATE", now)
        else:
            self._finish("RESTART", now)

    def _settle_residue(self) -> bool:
        wanted = self._wanted
        if not self._finish("TRUNCATE", time.monotonic()):
            return False
        self._truncated = max(self._truncated, wanted)
        return True

    def _finish(self, mode: Mode, now: float) -> bool:
        """RESTART or TRUNCATE; on busy, back off (50 ms doubling to 1 s) and report."""
        try:
            with self.gate.checkpointing() as free:
                busy = self._checkpoint(mode)[0] if free else 1
        except sqlite3.Error as exc:
            if not _busy(exc):
                self._failed(exc, now, mode)
                return False
            busy = 1
        if busy:
            self._backoff_s = min(MAX_BACKOFF_S, max(self._poll_s, self._backoff_s * 2))
            self._retry_at = now + self._backoff_s
            self._blocked(now)
            return False
        self._backoff_s = 0.0
        self._retry_at = 0.0
        if mode == "TRUNCATE":
            self.truncates += 1
            self._restarted = None
        else:
            self.restarts += 1
            self._restarted = (now, self._stamp())
        self._unblocked()
        self.wal_bytes = self._wal_size()
        return True

    def _failed(self, exc: sqlite3.Error, now: float, mode: Mode = "PASSIVE") -> None:
        """A checkpoint failed for want of space or on I/O: back off, say so (rate-limited);
        a reader pin reported before is no longer the story."""
        if self._failing is None:
            self._failing, self._fails = (str(exc), now), 0
        self._fails += 1
        self._fail_backoff_s = min(FAIL_MAX_S, max(FAIL_MIN_S, self._fail_backoff_s * 2))
        self._fail_retry_at = now + self._fail_backoff_s
        self._blocked_since, self._reported = None, False
        self._said.say(
            "WAL checkpoint failed",
            logging.WARNING,
            "WAL checkpoint (%s) failed (tried again in %gs): %s",
            mode,
            self._fail_backoff_s,
            exc,
        )

    def _recovered(self, now: float) -> None:
        """A checkpoint went through after failures."""
        failing, self._failing = self._failing, None
        self._fail_backoff_s = self._fail_retry_at = 0.0
        if failing is not None:
            self._said.flush()
            log.info(
                "WAL checkpoints work again after %.0fs failing (%d tries failed)",
                now - failing[1],
                self._fails,
            )

    def _blocked(self, now: float) -> None:
        if self._blocked_since is None:
            self._blocked_since = now
        elif not self._reported and now - self._blocked_since >= REPORT_AFTER_S:
            self._reported = True
            log.warning(
                "WAL checkpoint blocked for %.0fs by a reader holding an old snapshot: the WAL"
                " is %.1f MB (bound storage.max_wal_mb = %g)%s; it may grow past the bound"
                " until that reader ends, and is checkpointed as soon as it does",
                now - self._blocked_since,
                self._wal_size() / 2**20,
                self.max_wal_bytes / 2**20,
                ", forgotten data still in it" if self.residue else "",
            )

    def _unblocked(self) -> None:
        since, self._blocked_since = self._blocked_since, None
        if since is not None and self._reported:
            log.info(
                "WAL checkpoint resumed after %.0fs blocked; the WAL is %.1f MB",
                time.monotonic() - since,
                self._wal_size() / 1e6,
            )
        self._reported = False

    def _rescue(self) -> None:
        """The WAL was removed: copy every frame its descriptor still holds into state.db."""
        if self._rescued:
            return
        self._rescued = True
        try:
            busy, frames, copied = self._checkpoint("FULL", RESCUE_BUSY_MS)
        except sqlite3.Error as exc:
            log.error("could not copy the removed WAL back into the DB: %s", exc)
            return
        if busy or copied < frames:
            log.error("only %d of %d frames of the removed WAL reached the DB", copied, frames)
        else:
            log.info("the removed WAL's %d frames were copied into the DB", frames)

    # --- sqlite -----------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(str(self._path), check_same_thread=False)
            self._conn.execute(f"PRAGMA synchronous={self._synchronous}")
            self._conn.execute("PRAGMA cache_size=-64")  # copying pages back needs no cache
            self._conn.execute("PRAGMA mmap_size=0")  # an unwritable file: an error, not SIGBUS
            self._timeout = -1
        return self._conn

    def _checkpoint(self, mode: Mode, busy_ms: int | None = None) -> tuple[int, int, int]:
        """(busy, frames in the log, frames copied back). PASSIVE never waits; the others wait
        up to `busy_ms` (default: the thread's `BUSY_MS`, or the caller's without the thread)."""
        wait_ms = self._busy_ms if busy_ms is None else busy_ms
        with self.lock:
            conn = self._connection()
            if mode != "PASSIVE" and self._timeout != wait_ms:
                conn.execute(f"PRAGMA busy_timeout={int(wait_ms)}")
                self._timeout = wait_ms
            busy, frames, copied = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        return int(busy), int(frames), int(copied)

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = self._wal.stat()
        except FileNotFoundError:
            return None
        return st.st_size, st.st_mtime_ns

    def _wal_size(self) -> int:
        try:
            return self._wal.stat().st_size
        except FileNotFoundError:
            return 0


def _busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY/LOCKED: another connection holds what the checkpoint needs (a reader, the
    writer); anything else (FULL, IOERR, READONLY, …) is storage failing."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    return primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
