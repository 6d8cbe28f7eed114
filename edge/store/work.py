"""The unit of work: one transaction (a savepoint inside one already open) per input, opened
by the executor's door; the app's code joins it. TaskManager results are settled in it, and
its effects wait for the outermost commit."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

from a2a_common.sqlite import storage_error
from a2a_common.writes import SyncWrite
from cache import Memory, StepOutcome, observed_candidates
from edge.store.commits import Commits
from sync import SyncOutbox
from taskmanager import Result, TaskManager, Workflow

log = logging.getLogger(__name__)


class Work:
    def __init__(
        self,
        *,
        commits: Commits,
        tm: TaskManager,
        memory: Memory,
        sync_outbox: SyncOutbox,
        scrub_wal: Callable[[], object] | None = None,
    ) -> None:
        self.commits = commits
        self.tm = tm
        # a step a forget reached ended (its args cleared): the WAL's older pages of them go
        # after the commit (SPEC 5.5; taskmanager/store.py `take_scrub`)
        self._scrub_wal = scrub_wal
        self._memory = memory
        self._sync = sync_outbox
        self.wake = asyncio.Event()  # set after every unit's commit: the deadline timer looks
        self._open: list[Result] = []  # the executor's units open now, innermost last

    @contextmanager
    def open(self) -> Iterator[Result]:
        """The executor's unit of work (edge/store/door.py): a transaction, or a savepoint
        inside the one open (a message in a group commit). TaskManager results merged into the
        yielded `Result` are settled in it (memory observations, the active workflow; reports
        are owed as the TaskManager publishes them).
        Raises `StorageUnavailable` when the DB refused it: nothing of it is on disk, and the
        board is read again to match."""
        result = Result()
        self._open.append(result)
        try:
            with self.commits.atomic():
                yield result
                self._settle(result)
                self.commits.after_commit(partial(self._committed, result))
        except BaseException as exc:
            self._reload_board(exc)
            raise
        finally:
            self._open.pop()

    def _reload_board(self, cause: BaseException) -> None:
        """The board read again to match the disk after a unit rolled back. A DB that cannot
        be read says why itself (a damaged one is `StorageCorrupt`: the stop), instead of
        hiding the unit's own error behind a raw sqlite3 one."""
        try:
            self.tm.reload()
        except sqlite3.Error as exc:
            raise storage_error(exc) from cause

    @contextmanager
    def unit(self) -> Iterator[Result]:
        """The app's unit: the one the executor opened for this input, joined (app methods
        never open their own); without an executor (the CLI while no service runs, the
        recovery at start) one of its own."""
        if self._open:
            yield self._open[-1]
            return
        with self.open() as result:
            yield result

    def after_commit(self, fn: Callable[[], object]) -> None:
        self.commits.after_commit(fn)

    def before_send(self, fn: Callable[[], object]) -> None:
        self.commits.before_send(fn)

    def _settle(self, result: Result) -> None:
        if self.tm.store.take_scrub() and self._scrub_wal is not None:
            self.commits.before_send(self._scrub_wal)  # before the answer goes out
        if result.accepted:
            self._memory.store.set_state("active_workflow_id", result.accepted[-1])
        for wf in result.finished:
            self._sync.enqueue(self._observe(wf))
            if self._memory.state("active_workflow_id") == wf.workflow_id:
                active = self.tm.active_ids()
                self._memory.store.set_state("active_workflow_id", active[-1] if active else "")

    def _observe(self, wf: Workflow) -> list[SyncWrite]:
        """Personalization from what the robot did (SPEC §5.4), tied to the turn's pair."""
        if wf.status != "completed" or not wf.pair_id or not wf.session_id:
            return []
        outcomes = [
            StepOutcome(s.capability_id, s.operation_id, s.status, s.args) for s in wf.steps
        ]
        return self._memory.observe(
            observed_candidates(outcomes), pair_id=wf.pair_id, session_id=wf.session_id
        )

    def _committed(self, result: Result) -> None:
        for ignored in result.ignored:
            log.info("taskmanager ignored an input: %s (%s)", ignored.reason, ignored.detail)
        self.wake.set()

    def decision(self, workflow_id: str, decision: object) -> None:
        """The supervisor's answer (`None`: none came)."""
        with self.unit() as result:
            result.merge(self.tm.decision(workflow_id, decision))
