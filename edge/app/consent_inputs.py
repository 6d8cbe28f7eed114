"""The consent inputs of the application layer (SPEC §5.6): `P/consent/request` from the local
UI, its refusals at the gate, the standing grants of a SIGHUP reload, and the
`consent.grant`/`consent.revoke` admin commands. `DeviceApp` (edge/app/device.py) exposes these as
its own methods; they run in its unit of work and refuse through its refusal path."""

from __future__ import annotations

from typing import Any

from a2a_common import jsonx
from edge.app.parts import AppParts
from edge.app.repeats import REUSED, answered_before
from edge.app.turn_inputs import fingerprint
from edge.channel.topics import Arrival, ConsentRequestMsg, Refusal, parse, ref_of


class ConsentInputs:
    def __init__(self, app: AppParts) -> None:
        self.app = app

    def take_consent(self, msg: ConsentRequestMsg, arrival: Arrival) -> None:
        """Every request gets `P/consent/result`; a repeat of an applied `request_id` the same
        answer again (applied once); one the register cannot take is refused with `ref` too."""
        key = f"consent:{msg.request_id}"
        ref = {"request_id": msg.request_id}
        person = [msg.person] if msg.person else []  # as before for the household's
        content = fingerprint(jsonx.dumps([msg.action, msg.scope, msg.ttl_s, *person]))
        reused = self.app.consent.refused(REUSED.error, REUSED.detail)
        if answered_before(
            self.app,
            key,
            content,
            topic=arrival.topic,
            answer_topic=self.app.topics.consent_result,
            refused={"request_id": msg.request_id, **reused.wire()},
        ):
            return
        with self.app.unit() as result:
            answer = self.app.consent.apply(result, msg, source="ui", request_id=msg.request_id)
            body = {"request_id": msg.request_id, **answer.wire()}
            self.app.outbox.enqueue(self.app.topics.consent_result, body)
            if answer.ok:  # a refused one changes nothing, not even a dedupe mark
                self.app.dedupe.mark(key, arrival.topic, content)
                self.app.dedupe.answered(key, body)
                self.app.after_commit(self.app.replayer.notify)
        if not answer.ok:
            refusal = Refusal(answer.error or "invalid_field", answer.detail or "")
            self.app.refuse(arrival.topic, refusal, ref=ref)

    def reject_consent(self, payload: bytes, refusal: Refusal) -> None:
        """A `P/consent/request` refused at the gate is answered all the same when its
        `request_id` can be read: the UI never waits for nothing."""
        request_id = ref_of(payload, self.app.settings.mqtt.max_payload_bytes).get("request_id")
        if not isinstance(request_id, str):
            return
        body = {"request_id": request_id, "ok": False, "grants": self.app.consent.grants()}
        body |= {"error": refusal.error, "detail": refusal.detail}
        with self.app.unit():
            self.app.outbox.enqueue(self.app.topics.consent_result, body)

    def reload_consent(self, categories: list[str], capabilities: list[str]) -> None:
        """SIGHUP: the grants standing in config, again; a dropped one ends like a revoke."""
        self.app.consent.register.set_standing(categories, capabilities)
        self.app.consent.recheck = True  # until the cancels commit (else the next tick does them)
        with self.app.unit() as result:
            result.merge(self.app.consent.enforce())
        self.app.consent.recheck = False

    def admin(self, action: str, args: dict[str, Any]) -> dict[str, Any]:
        """`consent.grant` / `consent.revoke` {scope, ttl_s?}: the same rules as the UI's."""
        wire = {**args, "request_id": "admin", "action": action}
        max_bytes = self.app.settings.mqtt.max_payload_bytes
        msg = parse(ConsentRequestMsg, jsonx.dumps(wire).encode(), max_bytes)
        if isinstance(msg, Refusal):
            return {"ok": False, "error": f"{msg.error}: {msg.detail}"}
        with self.app.unit() as result:
            answer = self.app.consent.apply(result, msg, source="cli", request_id=None)
        if not answer.ok:
            return {"ok": False, "error": f"{answer.error}: {answer.detail}"}
        self.app.replayer.notify()
        return {"ok": True, "result": {"grants": answer.grants}}
