"""Refusals (SPEC §2, §2.4): what the app says on `P/runtime/error` when it refuses an input,
the answers a refused turn, press or failed message still gets. `DeviceApp` (edge/app/device.py)
exposes these as its own methods."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from a2a_common import jsonx
from a2a_common.clock import iso
from edge.app.parts import RefusalParts
from edge.channel.topics import Refusal, ref_of
from edge.host.log import RepeatLimiter, fields

log = logging.getLogger(__name__)


class Refusals:
    def __init__(self, app: RefusalParts) -> None:
        self.app = app
        logs = app.settings.log  # a flood of refusals: a bounded number of lines, all counted
        self.said = RepeatLimiter(log, logs.repeat_lines, logs.repeat_window_s, app.clock.monotonic)

    def dead_letter(self, topic: str, payload: bytes, error: str) -> None:
        """A message a handler failed on (SPEC §2.4): kept for the operator, then refused."""
        with self.app.unit():
            self.app.dead_letters.add(topic, payload, error)
        refusal = Refusal("internal_error", "the runtime could not apply it")
        self.refuse(topic, refusal, payload=payload, logged=True)  # the intake's ERROR said it

    def refuse(
        self,
        topic: str,
        refusal: Refusal,
        *,
        payload: bytes | None = None,
        ref: dict[str, Any] | None = None,
        logged: bool = False,
    ) -> None:
        """SPEC §2: a refusal on `P/runtime/error` (QoS 0: it reports, it changes nothing),
        with `ref`, the ids the refused payload carried (SPEC §2.4)."""
        if ref is None and payload is not None:
            ref = ref_of(payload, self.app.settings.mqtt.max_payload_bytes)
        kind = self.app.topics.kind_of(topic) or "other"
        self.app.metrics.inc(
            "a2a_refusals_total",
            "inbound messages refused on P/runtime/error, by topic (under P/) and error",
            topic=kind,
            error=refusal.error,
        )
        family = "/".join(kind.split("/")[:2]) if kind.startswith("task/") else kind.split("/")[0]
        said = partial(  # with the refusal, after the commit: a held try says nothing
            self.said.say,
            f"refused {family} {refusal.error}",  # per topic family: `task/callback/<any>` is one
            logging.DEBUG if logged else logging.WARNING,
            "refused message on %s: %s (%s)",
            topic,
            refusal.error,
            refusal.detail,
            extra=fields(topic=topic, error=refusal.error, **(ref or {})),
        )
        self.app.after_commit(said)
        body: dict[str, Any] = {
            "topic": topic,
            "error": refusal.error,
            "detail": refusal.detail,
            "ts": iso(self.app.clock.now()),
        }
        if ref:
            body["ref"] = ref
        wire = self.app.wire
        if wire is None:
            return

        def publish() -> None:
            try:  # a refusal must never fail in its turn: the intake would stop
                wire.publish(self.app.topics.runtime_error, jsonx.dumps(body).encode(), qos=0)
            except Exception:
                log.exception("refusal on %s could not be published", topic)

        # after the commit of the unit it belongs to: a unit the DB could not take rolls back,
        # its message is held and applied later (SPEC §2.4), and must not look refused too
        self.app.after_commit(publish)

    def reject_turn(self, payload: bytes, refusal: Refusal) -> None:
        """A refused `P/turn/request` whose `turn_id` can be read is answered all the same."""
        turn_id = ref_of(payload, self.app.settings.mqtt.max_payload_bytes).get("turn_id")
        if isinstance(turn_id, str):
            self.app.turns.reject(turn_id, refusal)

    def reject_pui(self, payload: bytes, refusal: Refusal) -> None:
        """A refused press whose `event_id` can be read gets `P/pui/result` all the same:
        `rejected` with the refusal's `error`, nothing cancelled — the button gets feedback."""
        event_id = ref_of(payload, self.app.settings.mqtt.max_payload_bytes).get("event_id")
        if not isinstance(event_id, str):
            return
        body = {"event_id": event_id, "status": "rejected", "workflow_ids": []}
        with self.app.unit():
            self.app.outbox.enqueue(self.app.topics.pui_result, {**body, "error": refusal.error})
