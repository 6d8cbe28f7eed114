"""Grant, revoke and expiry as the app runs them (SPEC §5.6), inside the caller's unit of work:
the register's change and its audit, the `consent` write for the cloud, and — for a capability
that is no longer covered — the cancel of every active workflow that needs it (reason
`consent_revoked`: `task/cancel` to its dispatched tasks, its events, its terminal report).
A category that is no longer covered leaves the next snapshot by itself: the cache reads the
held categories from the register each time it builds one."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from a2a_common.people import HOUSEHOLD
from edge.channel.topics import ConsentRequestMsg
from edge.store.commits import AfterCommit, run_now
from edge.store.consent import ConsentRegister, normal_scope
from sync import SyncOutbox
from taskmanager import Result, TaskManager

log = logging.getLogger(__name__)
REVOKED = "consent_revoked"


@dataclass(frozen=True)
class ConsentAnswer:
    ok: bool
    grants: list[dict[str, Any]]
    error: str | None = None
    detail: str | None = None

    def wire(self) -> dict[str, Any]:
        """`P/consent/result` less its `request_id`; also the admin command's result."""
        body: dict[str, Any] = {"ok": self.ok, "grants": self.grants}
        if self.error is not None:
            body["error"] = self.error
            body["detail"] = self.detail or self.error
        return body


class ConsentOps:
    def __init__(
        self,
        *,
        register: ConsentRegister,
        sync_outbox: SyncOutbox,
        tm: TaskManager,
        after_commit: AfterCommit = run_now,
    ):
        self._after_commit = after_commit  # what it logs is said once its unit committed
        self.register = register
        self._sync = sync_outbox
        self._tm = tm
        self.recheck = False  # a reload's cancels did not commit: the next tick does them

    def _said(self, msg: str, *args: object) -> None:
        self._after_commit(partial(log.info, msg, *args))

    def grants(self) -> list[dict[str, Any]]:
        return [g.wire() for g in self.register.held()]

    def refused(self, error: str, detail: str) -> ConsentAnswer:
        return ConsentAnswer(False, self.grants(), error, detail)

    def check(self, action: str, scope: str, person: str = HOUSEHOLD) -> tuple[str, str] | None:
        """What the register cannot take, as (error, detail); None when it can. The payload's
        form (types, the scope's pattern, ttl_s) is the model's (`ConsentRequestMsg`)."""
        kind, _, name = scope.partition(":")
        if kind == "capability" and name not in self._tm.catalog.capabilities():
            return "unknown_capability", f"scope {scope}: no such capability in the catalog"
        standing = person == HOUSEHOLD and self.register.standing(normal_scope(scope))
        if action == "revoke" and standing:
            where = f"privacy.consented_{'categories' if kind == 'category' else 'capabilities'}"
            return "standing_in_config", f"{scope} stands in config ({where}); change it there"
        return None

    def apply(
        self, result: Result, msg: ConsentRequestMsg, *, source: str, request_id: str | None
    ) -> ConsentAnswer:
        """Call inside the caller's unit of work (`result` is its TaskManager result)."""
        action, scope, ttl_s = msg.action, msg.scope, msg.ttl_s
        person = msg.person or HOUSEHOLD  # SPEC 5.7: a grant without `person` is the household's
        refused = self.check(action, scope, person)
        if refused is not None:
            return ConsentAnswer(False, self.grants(), *refused)
        scope = normal_scope(scope)
        register = self.register
        if action == "grant":
            grant = register.grant(scope, ttl_s, source, request_id, person)
            self._sync.enqueue([register.write("grant", scope, source, grant.expires_at, person)])
            self._said("consent granted: %s for %s (%s, ttl %s)", scope, person, source, ttl_s)
        elif register.revoke(scope, source, request_id, person):
            self._sync.enqueue([register.write("revoke", scope, source, None, person)])
            self._said("consent revoked: %s for %s (%s)", scope, person, source)
            result.merge(self.enforce())
        return ConsentAnswer(True, self.grants())

    def expire(self) -> tuple[Result, int]:
        """Grants whose time has passed end like a revoke, once noticed (the app's tick);
        with how many ended. A workflow that needs what no grant covers is cancelled."""
        result = Result()
        gone = self.register.expire()
        for grant in gone:
            self._sync.enqueue(
                [self.register.write("expire", grant.scope, grant.source, None, grant.person)]
            )
            self._said("consent expired: %s for %s", grant.scope, grant.person)
        if gone or self.recheck:
            result.merge(self.enforce())
        return result, len(gone)

    def enforce(self) -> Result:
        """Every active workflow that needs a capability no grant covers now for its person is
        cancelled at once (after a revoke, an expiry, or a config reload that dropped a
        standing grant): a revoke of one person's grant ends only what that grant covered."""
        held: dict[str, frozenset[str]] = {}  # person -> the capabilities covered for them
        result = Result()
        ended: set[str] = set()
        for capability_id in self._tm.catalog.capabilities():
            for workflow_id in self._tm.needing(capability_id):
                person = self._tm.person_of(workflow_id)
                if person not in held:
                    held[person] = self.register.capabilities(person)
                if workflow_id in ended or capability_id in held[person]:
                    continue
                ended.add(workflow_id)
                self._said("workflow %s cancelled: %s (%s)", workflow_id, REVOKED, capability_id)
                result.merge(self._tm.cancel(workflow_id, REVOKED))
        return result
