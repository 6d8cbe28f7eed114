"""Taking inbound messages in: channel batches -> route -> the app's input -> ack, with the
delivery discipline of SPEC §2.4. Every message gets an outcome (applied, or refused) and is
acknowledged once it has one; a handler that fails is a refusal and a dead letter; what the DB
cannot take now is held in order and tried again with backoff until it can."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from a2a_common.sqlite import StorageCorrupt, StorageUnavailable
from edge.app import DeviceApp
from edge.mqtt import Inbound, MqttChannel
from edge.routes import Route, Router
from edge.topics import Arrival, Refusal

log = logging.getLogger(__name__)

MAX_BATCH = 100  # inbound messages per group commit
MAX_HELD = 1000  # inbound messages held while the DB refuses writes; beyond, refused and acked
HOLD_RETRY_MIN_S, HOLD_RETRY_MAX_S = 0.1, 5.0
DEBUG_RAISE = b'"a2a_debug_raise"'  # with A2A_DEBUG_HOOKS=1 a payload with this key fails


class Intake:
    def __init__(
        self,
        *,
        app: DeviceApp,
        channel: MqttChannel,
        router: Router,
        max_payload_bytes: int,
        fatal: Callable[[str], None],
    ) -> None:
        self._app = app
        self._channel = channel
        self._router = router
        self._max_bytes = max_payload_bytes
        self._fatal = fatal
        self._debug = os.environ.get("A2A_DEBUG_HOOKS") == "1"  # tests: faults on purpose
        self.accepting = True
        self.failures = 0  # batches that failed with a bug of ours (health reports them)
        self._held: list[Inbound] = []  # what the DB could not take yet, in arrival order
        self._retry_handle: asyncio.TimerHandle | None = None
        self._retry_delay = HOLD_RETRY_MIN_S
        self._storage_error = ""

    @property
    def held(self) -> int:
        return len(self._held)

    def stop(self) -> None:
        """Take nothing more; held messages stay unacked (the broker keeps them)."""
        self.accepting = False
        if self._retry_handle is not None:
            self._retry_handle.cancel()

    async def run(self) -> None:
        async for batch in self._channel.batches(MAX_BATCH):
            if not self.accepting:
                return  # not acked: the broker keeps them for our next session
            try:
                self._take_batch(batch)
            except Exception:  # a bug of ours: counted and reported, the intake goes on
                self.failures += 1
                log.exception("inbound batch failed; its messages stay unacknowledged")

    def _take_batch(self, messages: Iterable[Inbound]) -> None:
        """Group commit: the messages (and what arrives meanwhile, up to MAX_BATCH) in one
        transaction, each in its own unit of work; acknowledgements, sends and turn starts
        only after the commit. What the DB cannot take now is held, in order, and tried again
        with backoff (SPEC §2.4): behind a held message every later one waits too."""
        app = self._app
        taken: list[Inbound] = []
        held_before = len(self._held)
        try:
            with app.work.savepoint():
                for msg in messages:
                    if not self.accepting:
                        break  # stopping: what is left stays unacked for the next run
                    taken.append(msg)
                    if self._held or not self._take(msg):
                        self._hold(msg)
                    else:
                        app.after_commit(partial(self._channel.ack, msg))
                app.reap_rows()  # PUBACKed rows, delivered reports, go in the same commit
        except StorageUnavailable as exc:  # the COMMIT itself failed: none of it is on disk
            log.error("state DB refused a group commit of %d messages: %s", len(taken), exc)
            del self._held[held_before:]
            for msg in taken:
                self._hold(msg, exc)
        except StorageCorrupt as exc:
            self._fatal(f"state DB is damaged: {exc}")
            return
        else:
            app.metrics.observe(
                "a2a_inbound_batch_messages", "inbound messages per group commit", len(taken)
            )
        if self._held:
            self._retry_held()

    def _take(self, msg: Inbound) -> bool:
        """Validate and apply one message in a unit of work; False when it must be held
        (the DB cannot take it now). A refusal is an outcome: it is acknowledged."""
        app = self._app
        route = self._router.route(msg.topic)
        if route is None:
            refusal = Refusal("unknown_topic", "topic is not an inbound topic of this device")
            app.refuse(msg.topic, refusal, payload=msg.payload)
            return True
        expires = None if msg.expiry_s is None else msg.received_at + msg.expiry_s
        arrival = Arrival(msg.topic, msg.received_at, expires)
        max_bytes = self._max_bytes
        try:
            with app.work.savepoint():
                refused = route.take(msg.payload, arrival, max_bytes)
                if self._debug and DEBUG_RAISE in msg.payload:
                    raise RuntimeError("debug hook: a handler fails")
                if refused is not None and route.refused is not None:
                    route.refused(msg.payload, refused)
        except StorageUnavailable as exc:
            # disk or DB cap full, or the file went read-only: nothing was written (the
            # savepoint rolled back); held and applied once the DB takes writes again
            self._storage_error = str(exc)
            return False
        except StorageCorrupt as exc:
            self._fatal(f"state DB is damaged: {exc}")
            return False
        except Exception as exc:
            log.exception("handler for %s failed; refused and kept as a dead letter", msg.topic)
            return self._dead_letter(msg, f"{type(exc).__name__}: {exc}", route)
        if refused is not None:
            app.refuse(msg.topic, refused, payload=msg.payload)
        return True

    def _dead_letter(self, msg: Inbound, error: str, route: Route[Any]) -> bool:
        try:
            self._app.dead_letter(msg.topic, msg.payload, error)
            if route.refused is not None:
                with self._app.unit():
                    route.refused(msg.payload, Refusal("internal_error", error))
        except StorageUnavailable as exc:
            self._storage_error = str(exc)
            return False
        return True

    def _hold(self, msg: Inbound, why: Exception | None = None) -> None:
        if why is not None:
            self._storage_error = str(why)
        if msg.held:
            self._held.append(msg)
            return
        if len(self._held) >= MAX_HELD:  # refused: an outcome the sender sees, acknowledged
            detail = f"state DB refuses writes and {MAX_HELD} messages wait already"
            self._app.refuse(msg.topic, Refusal("storage_unavailable", detail), payload=msg.payload)
            self._channel.ack(msg)
            return
        if not self._held:
            log.error("state DB refuses writes (%s): holding inbound messages", self._storage_error)
        # held, not refused: its one outcome is the applied one, once the DB takes writes
        self._held.append(msg.as_held())

    def _retry_held(self) -> None:
        if self._retry_handle is not None or not self.accepting:
            return
        delay = self._retry_delay
        self._retry_delay = min(self._retry_delay * 2, HOLD_RETRY_MAX_S)
        self._retry_handle = asyncio.get_running_loop().call_later(delay, self._take_held)

    def _take_held(self) -> None:
        self._retry_handle = None
        held, self._held = self._held, []
        self._take_batch(held)
        if not self._held:
            log.warning("state DB takes writes again: %d held messages applied", len(held))
            self._retry_delay = HOLD_RETRY_MIN_S
            self._storage_error = ""
