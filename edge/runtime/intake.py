"""Taking inbound messages in: channel batches -> route -> the app's input -> ack, with the
delivery discipline of SPEC §2.4. Every message gets an outcome (applied, or refused) and is
acknowledged once it has one; a handler that fails is a refusal and a dead letter; what the DB
cannot take now is held in order and tried again by the door (edge/store/door.py) until it can. A
batch that fails outside every handler is taken again one message at a time, so no message is
left without an outcome."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from functools import partial
from typing import Any

from edge.app.device import DeviceApp
from edge.channel.mqtt import Inbound, MqttChannel
from edge.channel.topics import Arrival, Refusal
from edge.runtime.routes import Route, Router
from edge.runtime.safety import SafetyLane
from edge.store.door import Door, Outcome

log = logging.getLogger(__name__)

MAX_BATCH = 100  # inbound messages per group commit
MAX_HELD = 1000  # inbound messages held while the DB refuses writes; beyond, refused and acked
DEBUG_RAISE = b'"a2a_debug_raise"'  # with A2A_DEBUG_HOOKS=1 a payload with this key fails
DEBUG_RAISE_BATCH = b'"a2a_debug_raise_batch"'  # ... and with this key its batch fails


class Intake:
    def __init__(
        self,
        *,
        app: DeviceApp,
        door: Door,
        channel: MqttChannel,
        router: Router,
        max_payload_bytes: int,
        lane: SafetyLane | None = None,
        refuse_now: Callable[[Inbound], bool] = lambda _msg: False,
    ) -> None:
        self._app = app
        self._metrics = app.metrics
        self._door = door
        self._channel = channel
        self._router = router
        self._max_bytes = max_payload_bytes
        self._debug = os.environ.get("A2A_DEBUG_HOOKS") == "1"  # tests: faults on purpose
        self.accepting = True
        self._held: list[Inbound] = []  # what the DB could not take yet, in arrival order
        self._waiting = False  # the door holds our retry
        # SPEC 2.4: held cancels (a PUI press, workflow.cancel) act at once (the lane) and are
        # applied before every other held input, by a retry at the door's front
        self._lane = lane
        self._urgent: list[Inbound] = []
        self._urgent_waiting = False
        self._refuse_now = refuse_now  # answered without the DB (a turn on a full disk)

    @property
    def held(self) -> int:
        return len(self._held) + len(self._urgent)

    def stop(self) -> None:
        """Take nothing more; held messages stay unacked (the broker keeps them)."""
        self.accepting = False

    async def run(self) -> None:
        async for batch in self._channel.batches(MAX_BATCH):
            if not self.accepting:
                return  # not acked: the broker keeps them for our next session
            self.take(batch)

    def take(self, messages: Iterable[Inbound], *, alone: bool = False) -> None:
        """Group commit: the messages (and what arrives meanwhile, up to MAX_BATCH) in one
        transaction, each in its own unit of work; acknowledgements, sends and turn starts
        only after the commit. What the DB cannot take now is held, in order, and tried again
        (SPEC §2.4): behind a held message every later one waits too. A batch that fails
        outside its handlers rolls back whole and each message is taken again on its own."""
        taken: list[Inbound] = []
        held_before, urgent_before = len(self._held), len(self._urgent)
        group = self._door.attempt("inbound batch", partial(self._take_all, messages, taken, alone))
        if group.outcome in (Outcome.HELD, Outcome.FAILED) and isinstance(messages, list):
            taken += messages[len(taken) :]  # not a channel batch: what it did not reach is ours
        if group.outcome is Outcome.HELD:  # the COMMIT itself failed: none of it is on disk
            log.error("state DB refused a group commit of %d messages", len(taken))
            del self._held[held_before:]
            del self._urgent[urgent_before:]
            for msg in taken:
                self._hold(msg)
        elif group.outcome is Outcome.FAILED:  # rolled back whole; nothing was acknowledged
            del self._held[held_before:]
            del self._urgent[urgent_before:]
            for msg in taken:
                if alone:
                    self._last_resort(msg, group.detail())
                else:
                    self.take([msg], alone=True)
        elif group.outcome is Outcome.DONE:
            self._metrics.observe(
                "a2a_inbound_batch_messages", "inbound messages per group commit", len(taken)
            )
        if self._held and not self._waiting and self.accepting:
            self._waiting = True
            self._door.wait("inbound message", self._take_held)
        if self._urgent and not self._urgent_waiting and self.accepting:
            self._urgent_waiting = True
            self._door.wait("safety input", self._take_urgent, first=True)

    def _take_all(self, messages: Iterable[Inbound], taken: list[Inbound], alone: bool) -> None:
        applied: list[Inbound] = []  # acked after the commit, together (one send)
        for msg in messages:
            if not self.accepting:
                break  # stopping: what is left stays unacked for the next run
            if not msg.held and self._refuse_now(msg):
                self._channel.ack(msg)  # its outcome was given without the DB
                continue
            taken.append(msg)
            urgent = self._lane is not None and self._lane.urgent(msg)
            if urgent and not msg.held:
                self._cover(msg)  # held requests before a press never start (SPEC 2.4)
            behind = self._urgent or (not urgent and self._held)  # cancels go first
            if behind or not self._take(msg):
                self._hold(msg)
            else:
                applied.append(msg)
        if applied:
            self._app.after_commit(partial(self._ack_all, applied))
        if self._debug and not alone and any(DEBUG_RAISE_BATCH in m.payload for m in taken):
            raise RuntimeError("debug hook: a batch fails outside its handlers")
        if not alone:
            self._app.reap_rows()  # PUBACKed rows, delivered reports, go in the same commit

    def _ack_all(self, messages: list[Inbound]) -> None:
        """A batch's PUBACKs after its commit, written in one send (a stand-in channel
        without `sending` acks each as it comes); one that fails stops none of the others."""
        channel = self._channel
        with getattr(channel, "sending", nullcontext)():
            for msg in messages:
                try:
                    channel.ack(msg)
                except Exception:
                    log.exception("acknowledging an inbound message failed")

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
        arrival = Arrival(msg.topic, msg.received_at, expires, msg.retained)
        failure = f"handler for {msg.topic} failed; refused and kept as a dead letter"
        apply = partial(self._apply, route, msg, arrival)
        attempt = self._door.attempt("inbound message", apply, failure=failure)
        if attempt.outcome is Outcome.FAILED:
            return self._dead_letter(msg, attempt.detail(), route)
        if attempt.outcome is not Outcome.DONE:
            return False  # held (nothing was written), or the DB is damaged (stopping)
        if attempt.value is not None:
            app.refuse(msg.topic, attempt.value, payload=msg.payload)
        return True

    def _apply(self, route: Route[Any], msg: Inbound, arrival: Arrival) -> Refusal | None:
        refused = route.take(msg.payload, arrival, self._max_bytes)
        if self._debug and DEBUG_RAISE in msg.payload:
            raise RuntimeError("debug hook: a handler fails")
        if refused is not None and route.refused is not None:
            route.refused(msg.payload, refused)
        return refused

    def _dead_letter(self, msg: Inbound, error: str, route: Route[Any] | None) -> bool:
        def keep() -> None:
            self._app.dead_letter(msg.topic, msg.payload, error)
            if route is not None and route.refused is not None:
                route.refused(msg.payload, Refusal("internal_error", error))

        attempt = self._door.attempt("dead letter", keep)
        if attempt.outcome is Outcome.FAILED:  # not even kept: refused all the same
            refusal = Refusal("internal_error", "the runtime could not apply it")
            self._app.refuse(msg.topic, refusal, payload=msg.payload)
        return not attempt.held

    def _last_resort(self, msg: Inbound, error: str) -> None:
        """A message whose unit fails even alone, outside its handler: dead-lettered and
        refused, so it is acknowledged with an outcome (SPEC §2.4) and never redelivered."""
        route = self._router.route(msg.topic)
        if self._dead_letter(msg, error, route):
            self._channel.ack(msg)
        else:
            self._hold(msg)

    def _cover(self, press: Inbound) -> None:
        """The workflow requests held before this press are covered by it (edge/runtime/
        safety.py): each is applied as one the press cancelled, never started."""
        if self._lane is not None:
            self._app.covered_requests.update(self._lane.covers(press, self._held))

    def _hold(self, msg: Inbound) -> None:
        if self._lane is not None and self._lane.urgent(msg):
            if not msg.held:
                self._cover(msg)  # a group commit refused: its earlier requests held again
            self._lane.held(msg)  # acts at once from memory (once per message)
            self._urgent.append(msg if msg.held else msg.as_held())
            return
        if self._lane is not None and not msg.held:
            self._lane.held(msg)  # a callback may confirm a stop the lane watches
        if msg.held:
            self._held.append(msg)
            return
        if len(self._held) >= MAX_HELD:  # refused: an outcome the sender sees, acknowledged
            detail = f"state DB refuses writes and {MAX_HELD} messages wait already"
            self._app.refuse(msg.topic, Refusal("storage_unavailable", detail), payload=msg.payload)
            self._channel.ack(msg)
            return
        # held, not refused: its one outcome is the applied one, once the DB takes writes
        self._held.append(msg.as_held())

    def _take_urgent(self) -> bool:
        """The door's front retry: True once every held cancel went through."""
        if not self.accepting:
            return True
        urgent, self._urgent = self._urgent, []
        self.take(urgent)
        if not self.accepting or self._door.closed:
            return True
        if self._urgent:
            return False
        self._urgent_waiting = False
        if self._lane is not None:
            self._lane.applied()
        log.warning("state DB takes writes again: %d held cancels applied first", len(urgent))
        return True

    def _take_held(self) -> bool:
        """The door's retry: True once every held message went through."""
        if not self.accepting:
            return True  # stopping: they stay unacked, the broker keeps them
        held, self._held = self._held, []
        self.take(held)
        if not self.accepting or self._door.closed:
            return True  # stopping (a damaged DB): they stay unacked, nothing was applied
        if self._held:
            return False
        self._waiting = False
        log.warning("state DB takes writes again: %d held messages applied", len(held))
        return True
