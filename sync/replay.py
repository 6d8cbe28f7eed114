"""Replay of the pending-sync outbox to `POST /v1/a2a/memory/sync` (the shell around
`sync.core`). One request in flight; oldest first; tenacity backoff with jitter while the cloud
is away or answers without settling anything, cut short by `kick()` when a turn proves it is
back.

A run of exchanges that settle nothing is a *stall*: one WARNING when it starts, one INFO when
writes are settled again; `sync_meta.stalled_since` holds its start for `a2a-edge status` and
`sync status` (with `last_error`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, stop_never
from tenacity import wait_exponential_jitter as backoff

from a2a_common.clock import Clock, iso
from a2a_common.db import Database
from a2a_common.ids import new_ulid
from a2a_common.sqlite import StorageError
from cloud_client.errors import CloudBadResponse, CloudRejected, CloudUnavailable
from sync.core import Pending, Plan, Position, plan_answer
from sync.errors import ConflictLoop, NoProgress
from sync.outbox import SyncOutbox

log = logging.getLogger(__name__)
SYNC_PATH = "/v1/a2a/memory/sync"
MAX_CONFLICTS_IN_A_ROW = 3


class Poster(Protocol):
    async def post_json(
        self, path: str, body: dict[str, Any], *, deadline_s: float, max_attempts: int = 5
    ) -> tuple[int, Any]: ...


class SyncSink(Protocol):
    """Where answers land: the memory cache (edge adapts it)."""

    def sync_position(self) -> Position: ...

    def adopt_sync(self, position: Position, *, force: bool) -> None: ...

    def apply_updates(self, updates: dict[str, Any]) -> None: ...

    def acked(self, writes: list[Pending]) -> None: ...

    def withheld(self, writes: list[Pending]) -> list[str]:
        """The write ids that must not leave the device (now): the privacy policy's last
        word, at read time, on what a sync request carries."""
        ...


class Replayer:
    def __init__(
        self,
        *,
        db: Database,
        atomic: Callable[[], AbstractContextManager[object]] | None = None,
        clock: Clock,
        outbox: SyncOutbox,
        poster: Poster,
        sink: SyncSink,
        device_id: str,
        batch_size: int,
        deadline_s: float = 10.0,
        max_backoff_s: float = 60.0,
        linger_s: float = 0.0,
    ) -> None:
        # the writer's transactions: edge passes its unit of work's, so that one connection
        # has one transaction API (and storage errors are translated where they commit)
        self._atomic = atomic or db.atomic
        self._clock = clock
        self._outbox = outbox
        self._poster = poster
        self._sink = sink
        self._device_id = device_id
        self._batch_size = batch_size
        self._deadline_s = deadline_s
        self._max_backoff_s = max_backoff_s
        self._linger_s = linger_s
        self.limit = batch_size
        self.in_flight = 0
        self.acked_total = 0
        self._stalled_since = outbox.meta("stalled_since")  # an episode outlives a restart
        self._stall_warned = False  # ... but each process says so once
        self._wake = asyncio.Event()
        self._kick = asyncio.Event()

    def notify(self) -> None:
        """There is something new to send."""
        self._wake.set()

    def kick(self) -> None:
        """The cloud answered something else: stop backing off, send now."""
        self._kick.set()
        self._wake.set()

    async def run(self, idle_check_s: float = 5.0) -> None:
        self._wake.set()  # writes an earlier run left go at once, not after the first idle check
        linger = 0.0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), idle_check_s)
            if self._wake.is_set() and linger:
                # the writes of the turns that follow within `linger_s` go in this request: one
                # exchange (its HTTP round trip, its commit) for a run of turns, not one each
                await asyncio.sleep(linger)
            linger = self._linger_s
            self._wake.clear()
            try:
                await self.drain()
            except ConflictLoop:  # a stall: warned and recorded; wait for a wake or the idle
                pass
            except StorageError as exc:  # the DB refuses writes: the runtime reports it
                log.warning("sync replay paused: the state DB refused a write: %s", exc)
            except Exception:  # keep replaying whatever one batch did
                log.exception("sync replay failed")

    async def _sleep(self, seconds: float) -> None:
        self._kick.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._kick.wait(), seconds)

    async def drain(
        self, *, attempts: int | None = None, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Send until the outbox is empty; returns how many writes were acked. With `attempts`
        set, give up (raising CloudUnavailable) after that many failed tries of one batch; give
        up too (ConflictLoop, also a CloudUnavailable) when the cloud answers version_conflict
        MAX_CONFLICTS_IN_A_ROW times in a row."""
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(CloudUnavailable),
            wait=backoff(multiplier=0.5, max=self._max_backoff_s, jitter=0.5),
            stop=stop_after_attempt(attempts) if attempts else stop_never,
            sleep=self._sleep,
            reraise=True,
        )
        done, conflicts = 0, 0
        while self._outbox.pending():
            plan: Plan | None = None
            batch: list[Pending] = []
            async for attempt in retrying:
                with attempt:
                    # read again on every try: a forget may have dropped writes meanwhile
                    batch = self._screen(self._outbox.oldest(self.limit))
                    plan = await self._exchange(batch) if batch else None
            if plan is None:
                if self._outbox.pending():
                    continue  # the whole batch was withheld: read the next one
                break
            conflicts = conflicts + 1 if plan.resend and plan.force_sync else 0
            done += len(plan.ack)
            if progress is not None:
                progress(done, self._outbox.pending())
            if conflicts >= MAX_CONFLICTS_IN_A_ROW:
                self._stalled("the cloud keeps answering version_conflict")
                raise ConflictLoop(conflicts)
        self.limit = self._batch_size
        return done

    def _screen(self, batch: list[Pending]) -> list[Pending]:
        """Drop from the outbox what the sink withholds (a pair that became sensitive after it
        was queued, say): it is never sent, and never waits to be."""
        held = set(self._sink.withheld(batch)) if batch else set()
        if not held:
            return batch
        with self._atomic():
            self._outbox.ack(held)
        log.info("sync: %d queued writes withheld by the privacy policy", len(held))
        return [w for w in batch if w.write_id not in held]

    async def _exchange(self, batch: list[Pending]) -> Plan:
        """One request and its answer applied; raises NoProgress (retried with backoff) when
        the answer settled nothing."""
        plan = await self._send(batch)
        self._apply(batch, plan)
        if not plan.progress:
            error = plan.error or "the sync answer settled nothing"
            self._stalled(error)
            raise NoProgress(error)
        if plan.ack or plan.dead:
            self._resumed()
        return plan

    @property
    def stalled_since(self) -> str | None:
        """When the current episode of exchanges that settle nothing began (None: none)."""
        return self._stalled_since

    def _stalled(self, error: str) -> None:
        if self._stalled_since is None:
            self._stalled_since = iso(self._clock.now())
            with self._atomic():
                self._outbox.set_meta("stalled_since", self._stalled_since)
        if not self._stall_warned:
            self._stall_warned = True
            log.warning(
                "sync makes no progress (since %s): %s; backing off, up to %gs between tries",
                self._stalled_since,
                error,
                self._max_backoff_s,
            )

    def _resumed(self) -> None:
        if self._stalled_since is None:
            return
        log.info("sync progresses again (it had stalled since %s)", self._stalled_since)
        with self._atomic():
            self._outbox.clear_meta("stalled_since")
        self._stalled_since, self._stall_warned = None, False

    async def _send(self, batch: list[Pending]) -> Plan:
        sync = self._sink.sync_position()
        body = {
            "request_id": new_ulid(self._clock),
            "device_id": self._device_id,
            "sync": {"cursor": sync.cursor, "version": sync.version},
            "writes": [w.wire() for w in batch],
        }
        # in memory only (the heartbeat shows it): two commits a request cost more bytes than
        # the turn's own, and after a crash nothing is in flight whatever the DB says
        self.in_flight = len(batch)
        location: str | None = None
        try:
            # one try per request: retries go through `drain`, which reads the batch again
            # (a forget may have dropped some of its writes meanwhile)
            status, answer = await self._poster.post_json(
                SYNC_PATH, body, deadline_s=self._deadline_s, max_attempts=1
            )
        except CloudRejected as exc:
            status, answer, location = exc.status, exc.body, exc.location
        except CloudBadResponse as exc:  # it answered, with nothing usable: a stall too
            self._note_error(batch, str(exc))
            self._stalled(str(exc))
            raise NoProgress(str(exc)) from exc
        except CloudUnavailable as exc:
            self._note_error(batch, str(exc))
            raise
        finally:
            self.in_flight = 0
        return plan_answer(
            batch,
            status,
            answer,
            limit=self.limit,
            batch_size=self._batch_size,
            location=location,
        )

    def _note_error(self, batch: list[Pending], error: str) -> None:
        with self._atomic():
            self._outbox.attempted([w.write_id for w in batch], error)
            self._outbox.set_meta("last_error", f"{iso(self._clock.now())} {error}")

    def _apply(self, batch: list[Pending], plan: Plan) -> None:
        """The answer, atomically: acks, dead letters, updates and the sync position together."""
        by_id = {w.write_id: w for w in batch}
        with self._atomic():
            self._outbox.ack(plan.ack)
            self._sink.acked([by_id[w] for w in plan.ack])
            self._outbox.kill(plan.dead)
            self._outbox.attempted(plan.unacked, plan.error)
            if plan.updates:
                self._sink.apply_updates(plan.updates)
            if plan.sync is not None:
                self._sink.adopt_sync(plan.sync, force=plan.force_sync)
            if plan.ack or plan.dead:
                self._outbox.set_meta("last_success", iso(self._clock.now()))
            if plan.error:
                self._outbox.set_meta("last_error", f"{iso(self._clock.now())} {plan.error}")
        self.limit = plan.next_limit
        self.acked_total += len(plan.ack)
        for write_id, reason in plan.dead:
            log.warning("sync write %s dead-lettered: %s", write_id, reason)
