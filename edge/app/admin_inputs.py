"""The admin inputs of the application layer: `P/admin/request` from the CLI (and, when no
service runs, the CLI's own calls of `admin`) and `P/memory/forget`. `DeviceApp`
(edge/app/device.py) exposes these as its own methods; they run in its unit of work and refuse
through its refusal path."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from a2a_common import jsonx
from a2a_common.people import is_person_id
from edge.app.forget_words import said_in
from edge.app.parts import AdminParts
from edge.app.repeats import EXPIRED, REUSED, answered_before, expired
from edge.app.turn_inputs import fingerprint
from edge.channel.topics import AdminRequestMsg, Arrival, ForgetMsg

log = logging.getLogger(__name__)
FORGET_SCOPES = ("pair", "session", "profile_key", "person", "all")


class AdminInputs:
    def __init__(self, app: AdminParts) -> None:
        self.app = app

    def take_admin(self, msg: AdminRequestMsg, arrival: Arrival) -> None:
        """A CLI command: applied once; a repeat gets the same answer, a reused id or a
        request past its `expires_at` (the CLI gave up) is refused and answered ok:false."""
        key = f"admin:{msg.request_id}"
        ref = {"request_id": msg.request_id}
        content = fingerprint(jsonx.dumps([msg.command, msg.args]))
        refused = {"request_id": msg.request_id, "ok": False, "error": REUSED.error}
        topic, answers = arrival.topic, self.app.topics.admin_response
        if answered_before(
            self.app, key, content, topic=topic, answer_topic=answers, refused=refused
        ):
            return
        # a workflow.cancel answered at once while the DB refused writes (SPEC 2.4,
        # edge/runtime/safety.py): recorded now with that answer, however late
        early = self.app.early_answers.get(key)
        if early is None and expired(msg.expires_at, self.app.clock.now()):
            with self.app.unit():
                self.app.outbox.enqueue(answers, {**refused, "error": EXPIRED.error})
            self.app.refuse(topic, EXPIRED, ref=ref)
            return
        with self.app.unit():
            self.app.dedupe.mark(key, topic, content)
            answer = {"request_id": msg.request_id, **self.admin(msg.command, msg.args)}
            answer = early or answer
            self.app.outbox.enqueue(answers, answer)
            self.app.dedupe.answered(key, answer)
        if early is not None:
            self.app.after_commit(partial(self.app.early_answers.pop, key, None))

    def admin(self, command: str, args: dict[str, Any]) -> dict[str, Any]:
        """A mutating CLI command in one unit of work: `{"ok": True, "result": …}` or
        `{"ok": False, "error": …}`."""
        if command == "workflow.cancel":
            return self._cancel(args.get("workflow_id"))
        if command == "memory.forget":
            return self._forget(args.get("scope"), args.get("id"), args.get("with_sources", True))
        if command == "memory.revoke":
            return self._revoke(args.get("key"))
        if command in ("consent.grant", "consent.revoke"):
            return self.app.consent_admin(command.partition(".")[2], args)
        if command == "sync.replay":
            requeue = args.get("requeue_dead", False)
            if not isinstance(requeue, bool):
                return {"ok": False, "error": "args.requeue_dead must be true or false"}
            return self._sync_replay(requeue)
        return {"ok": False, "error": f"{command} is not supported by this build yet"}

    def _cancel(self, workflow_id: Any) -> dict[str, Any]:
        if not isinstance(workflow_id, str) or not workflow_id:
            return {"ok": False, "error": "args.workflow_id is required"}
        with self.app.unit() as result:
            result.merge(self.app.tm.cancel(workflow_id, "user"))
        if result.ignored:
            return {"ok": False, "error": f"no active workflow {workflow_id}"}
        return {"ok": True, "result": {"cancelled": [w.workflow_id for w in result.finished]}}

    def _forget(self, scope: Any, target: Any, with_sources: Any = True) -> dict[str, Any]:
        if not isinstance(with_sources, bool):
            return {"ok": False, "error": "args.with_sources must be true or false"}
        if scope not in FORGET_SCOPES:
            return {
                "ok": False,
                "error": "args.scope: pair|session|profile_key|person (with id) or all",
            }
        if scope == "all" and target is not None:
            return {"ok": False, "error": "args.id must be absent for scope all"}
        if scope != "all" and not (isinstance(target, str) and 0 < len(target) <= 128):
            return {"ok": False, "error": "args.id must be a string of 1 to 128 characters"}
        if scope == "person" and not is_person_id(target):
            return {"ok": False, "error": "args.id: a person id (1-64, no # + / or whitespace)"}
        with self.app.unit():
            removed = self._forget_in_unit(scope, target, with_sources)
        return {"ok": True, "result": {"removed": removed}}

    def _forget_in_unit(
        self, scope: str, target: str | None, with_sources: bool = True
    ) -> dict[str, int]:
        turns = self.app.memory.store.turn_ids(scope, target, with_sources=with_sources)
        said = said_in(self.app.memory.db, turns or [])  # read before the forget deletes them
        removed = self.app.memory_ops.forget(scope, target, with_sources=with_sources)
        self.app.dedupe.forget_answers(None if turns is None else [f"turn:{t}" for t in turns])
        if scope == "all":  # a dead-lettered turn holds the user's words too
            log.info("forget all: %d inbound dead letters wiped", self.app.dead_letters.wipe())
            removed["workflows"] = self.app.tm.forget_all(self._drop_reports)["workflows"]
        elif turns:  # the workflows those turns asked for, or quoting their words
            ended, traces = self.app.tm.store.forget_words(turns, said)
            self._drop_reports(ended)
            if ended or traces:
                removed["workflows"] = len(ended)
        self.app.work.before_send(self.app.checkpointer.truncate)  # before its answer is sent
        return removed

    def _drop_reports(self, workflow_ids: list[str]) -> int:
        self.app.work.before_send(partial(self.app.reports.forgotten, set(workflow_ids)))
        return self.app.sync.drop_reports(workflow_ids) + self.app.reports.owed.drop(workflow_ids)

    def _revoke(self, key: Any) -> dict[str, Any]:
        if not isinstance(key, str) or not key:
            return {"ok": False, "error": "args.key is required"}
        with self.app.unit():
            revoked = self.app.memory_ops.revoke(key)
        return {"ok": True, "result": revoked}

    def _sync_replay(self, requeue_dead: bool) -> dict[str, Any]:
        with self.app.unit():
            requeued = self.app.sync.requeue_dead() if requeue_dead else 0
        self.app.replayer.kick()
        pending, dead = self.app.sync.pending(), self.app.sync.dead_count()
        return {"ok": True, "result": {"pending": pending, "requeued": requeued, "dead": dead}}

    def take_forget(self, msg: ForgetMsg, arrival: Arrival) -> None:
        key = f"forget:{msg.request_id}"
        content = fingerprint(jsonx.dumps([msg.scope, msg.id, msg.with_sources]))
        refused = {"request_id": msg.request_id, "removed": {}, "ok": False}
        refused["error"] = REUSED.error
        topic, answers = arrival.topic, self.app.topics.forget_result
        if answered_before(
            self.app, key, content, topic=topic, answer_topic=answers, refused=refused
        ):
            return
        with self.app.unit():
            self.app.dedupe.mark(key, topic, content)
            removed = self._forget_in_unit(msg.scope, msg.id, msg.with_sources)
            body = {"request_id": msg.request_id, "removed": removed}
            self.app.outbox.enqueue(answers, body)
            self.app.dedupe.answered(key, body)
