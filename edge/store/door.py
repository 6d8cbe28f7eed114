"""The one door (docs/design.md, *One door*): every kind of input — an inbound message, a
deadline, a report's answer, a turn's answer, a PUBACK, a connection change, a reload, a
housekeeping sweep — is applied through here, the same way.

`attempt(kind, fn)` opens the outermost unit of work (a savepoint when one is open: the group
commit) and runs `fn` in it; what it caused outside the DB runs after the commit
(edge/store/commits.py). Its outcome is one of four, and this module is the only place that tells
them apart:

- DONE: committed.
- HELD: the DB refuses writes now (`StorageUnavailable`: a full disk, the DB size cap, a file
  gone read-only). Nothing of it is on disk; it is tried again, in order, with backoff, until the
  DB takes it (`run`, `until_done`: the hold-and-retry policy of SPEC §2.4, one for every kind).
- FATAL: the DB is damaged (`StorageCorrupt`): the runtime stops, exit 1, acknowledging nothing.
- FAILED: any other error, a bug of ours: counted per kind and logged; a message's is a dead
  letter and a refusal (edge/runtime/intake.py).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import sqlite3
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from a2a_common.sqlite import StorageCorrupt, StorageUnavailable, storage_error

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_MIN_S, RETRY_MAX_S = 0.1, 5.0


class Outcome(enum.Enum):
    DONE = "done"
    HELD = "held"
    FAILED = "failed"
    FATAL = "fatal"


@dataclass(frozen=True)
class Attempt(Generic[T]):
    outcome: Outcome
    value: T | None = None
    error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.outcome is Outcome.DONE

    @property
    def held(self) -> bool:
        return self.outcome is Outcome.HELD

    def detail(self) -> str:
        return "" if self.error is None else f"{type(self.error).__name__}: {self.error}"


def _damage_behind(exc: BaseException) -> StorageCorrupt | None:
    """A damaged DB behind another error (a package's own error raised from a sqlite3 one)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, StorageCorrupt):
            return cause
        if isinstance(cause, sqlite3.Error):
            translated = storage_error(cause)
            if isinstance(translated, StorageCorrupt):
                return translated
        cause = cause.__cause__ or cause.__context__
    return None


def _log_fatal(reason: str) -> None:
    log.critical("%s", reason)


Retry = Callable[[], bool]  # True: it went through (or has an outcome); False: still held


class Door:
    def __init__(self, *, unit: Callable[[], AbstractContextManager[Any]]) -> None:
        self._unit = unit
        self.on_fatal: Callable[[str], None] = _log_fatal  # the executor's stop, once it runs
        # told of every refusal (the executor gives the storage reserve back on a full disk)
        self.on_refused: Callable[[StorageUnavailable], None] = lambda _exc: None
        self.on_back: Callable[[], None] = lambda: None  # every held input applied
        self.failures: Counter[str] = Counter()  # inputs that failed with a bug, by kind
        self.storage_error = ""  # why the DB refused the last write it refused ("" once back)
        self._told: set[str] = set()  # kinds held and said so in the log, this episode
        self._waiting: list[tuple[str, Retry]] = []  # held inputs, in the order they came
        self._keys: set[str] = set()  # held inputs that stand for every later one like them
        self._timer: asyncio.TimerHandle | None = None
        self._delay = RETRY_MIN_S
        self._closed = False

    # --- one try ------------------------------------------------------------------------------
    def attempt(self, kind: str, fn: Callable[[], T], *, failure: str = "") -> Attempt[T]:
        """`fn` in the outermost unit of work (or a savepoint of the one open), once;
        `failure`: what the log says when it fails with a bug (one ERROR line with it)."""
        try:
            with self._unit():
                value = fn()
        except StorageUnavailable as exc:  # nothing of it is on disk: tried again later
            if kind not in self._told:  # once per kind while the episode lasts
                self._told.add(kind)
                log.error("state DB refuses writes (%s): holding %s", exc, kind)
            self.storage_error = str(exc)
            self.on_refused(exc)
            return Attempt(Outcome.HELD, error=exc)
        except StorageCorrupt as exc:
            return self._fatal(exc)
        except Exception as exc:
            damaged = _damage_behind(exc)  # a read of a damaged page, wrapped by a package
            if damaged is not None:
                return self._fatal(damaged)
            self.failures[kind] += 1
            log.exception("%s", failure or f"{kind} failed inside the runtime")
            return Attempt(Outcome.FAILED, error=exc)
        if not self._waiting:
            self._back()
        return Attempt(Outcome.DONE, value)

    def _back(self) -> None:
        was, self.storage_error = self.storage_error, ""
        self._told.clear()
        if was:
            self.on_back()

    def _fatal(self, exc: BaseException) -> Attempt[Any]:
        """The DB is damaged: the stop, and nothing held is tried again (none of it would
        apply; what was not acknowledged comes again after the restart)."""
        self.close()
        self.on_fatal(f"state DB is damaged: {exc}")
        return Attempt(Outcome.FATAL, error=exc)

    @property
    def closed(self) -> bool:
        return self._closed

    # --- held and tried again -----------------------------------------------------------------
    @property
    def held(self) -> int:
        return len(self._waiting)

    def held_kinds(self) -> list[str]:
        return sorted({kind for kind, _ in self._waiting})

    def run(self, kind: str, fn: Callable[[], object], *, key: str | None = None) -> Attempt[Any]:
        """Apply `fn` now; when the DB refuses it, hold it and apply it once the DB takes writes,
        after every input held before it. With a `key`, one held input stands for all later ones
        of that key (a sweep, a PUBACK reap: doing it once later does it for all)."""
        if key is not None and key in self._keys:
            return Attempt(Outcome.HELD)
        if self._waiting:  # behind what is held: its turn comes after theirs
            first: Attempt[Any] = Attempt(Outcome.HELD)
        else:
            first = self.attempt(kind, fn)
        if first.held:

            def again() -> bool:
                return not self.attempt(kind, fn).held

            self.wait(kind, again, key=key)
        return first

    async def until_done(self, kind: str, fn: Callable[[], T]) -> T:
        """Apply `fn`, held as `run` holds it, and return its value once it committed; raises
        what it raised when it failed otherwise (cancelled: it is held no longer)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()

        def settle(attempt: Attempt[T]) -> bool:
            if attempt.held:
                return False
            if not done.done():
                if attempt.done:
                    done.set_result(attempt.value)  # type: ignore[arg-type]
                else:
                    done.set_exception(attempt.error or RuntimeError(kind))
            return True

        def again() -> bool:
            return done.cancelled() or settle(self.attempt(kind, fn))

        if self._waiting or not settle(self.attempt(kind, fn)):
            self.wait(kind, again)
        return await done

    def wait(self, kind: str, retry: Retry, *, key: str | None = None, first: bool = False) -> None:
        """Queue a held input's retry; `retry` returns False while the DB still refuses.
        `first`: ahead of every other held input (held cancels, SPEC 2.4: nothing starts
        before them once storage is back)."""
        if key is not None:
            self._keys.add(key)
            retry = self._keyed(key, retry)
        if first:
            self._waiting.insert(0, (kind, retry))
        else:
            self._waiting.append((kind, retry))
        self._schedule()

    def _keyed(self, key: str, retry: Retry) -> Retry:
        def again() -> bool:
            if retry():
                self._keys.discard(key)
                return True
            return False

        return again

    def _schedule(self) -> None:
        if self._timer is not None or self._closed or not self._waiting:
            return
        delay, self._delay = self._delay, min(self._delay * 2, RETRY_MAX_S)
        self._timer = asyncio.get_running_loop().call_later(delay, self.retry_now)

    def retry_now(self) -> None:
        """Try what is held, oldest first; stop at the first the DB still refuses."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiting and not self._closed:
            entry = self._waiting[0]
            kind, retry = entry
            try:
                went = retry()
            except Exception:  # a retry's own outcome handling failed: never stop the rest
                log.exception("retrying a held %s failed", kind)
                went = True
            if not went:
                self._schedule()
                return
            self._waiting.remove(entry)  # by identity: a retry may have queued one first
        if self._closed:
            return
        if self.storage_error and not self._waiting:
            log.warning("state DB takes writes again: every held input applied")
        self._back()
        self._delay = RETRY_MIN_S

    def close(self) -> None:
        """At a stop: nothing more is tried (held messages stay unacked: the broker keeps
        them; other held inputs come again at the next start, from what is on disk)."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
