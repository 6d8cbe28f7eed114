"""Who is there (SPEC §4.8): each agent's last status — state, boot, since when, the tasks it
said it holds — in memory for the core and in the `agents` table for `a2a-edge status` and the
console. A row is written only when something in it changed: a flood of repeats costs no write.

`since` is the runtime's instant of the last change of state or boot; `ts` the agent's own
stamp as it sent it (its clock, shown, never trusted). `known` is false for a capability the
catalog does not have: kept and shown, never acted on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from a2a_common.clock import iso
from a2a_common.db import Database
from a2a_common.sqlite import Migration

MAX_TASKS_SHOWN = 32
# capabilities the catalog does not have, kept and shown at most (a status for one more is
# refused `too_many_agents`): a flood of made-up capability ids grows no table, no metric
MAX_UNKNOWN = 32


def _v5(db: Database) -> None:
    db.table("agents").create(
        {
            "capability_id": str,
            "state": str,
            "boot_id": str,
            "since": str,
            "tasks": str,
            "ts": str,
            "known": int,
            "updated_at": str,
        },
        pk="capability_id",
        not_null={"state", "since", "tasks", "known", "updated_at"},
    )


MIGRATIONS = [Migration("taskmanager_0005_agents", _v5)]


@dataclass(frozen=True)
class Agent:
    capability_id: str
    state: str
    boot_id: str | None
    since: str
    tasks: tuple[str, ...] = ()
    ts: str | None = None
    known: bool = True

    def view(self) -> dict[str, Any]:
        return {
            "capability_id": self.capability_id,
            "state": self.state,
            "boot_id": self.boot_id,
            "since": self.since,
            "tasks": list(self.tasks[:MAX_TASKS_SHOWN]),
            "ts": self.ts,
            "known": self.known,
        }


class AgentStore:
    def __init__(self, *, db: Database) -> None:
        self._db = db

    def list(self) -> list[Agent]:
        """Every agent of the catalog, and at most MAX_UNKNOWN others (those last updated:
        a DB an older version let a flood grow shows no more)."""
        rows = self._db.execute(
            "SELECT capability_id, state, boot_id, since, tasks, ts, known FROM agents"
            " WHERE known = 1 OR capability_id IN (SELECT capability_id FROM agents"
            " WHERE known = 0 ORDER BY updated_at DESC, capability_id LIMIT ?)"
            " ORDER BY capability_id",
            [MAX_UNKNOWN],
        ).fetchall()
        return [
            Agent(cap, state, boot, since, tuple(json.loads(tasks)), ts, bool(known))
            for cap, state, boot, since, tasks, ts, known in rows
        ]

    def save(self, agent: Agent, now: datetime) -> None:
        self._db.execute(
            "INSERT INTO agents (capability_id, state, boot_id, since, tasks, ts, known,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (capability_id) DO UPDATE"
            " SET state = excluded.state, boot_id = excluded.boot_id, since = excluded.since,"
            " tasks = excluded.tasks, ts = excluded.ts, known = excluded.known,"
            " updated_at = excluded.updated_at",
            [
                agent.capability_id,
                agent.state,
                agent.boot_id,
                agent.since,
                json.dumps(list(agent.tasks), ensure_ascii=False),
                agent.ts,
                int(agent.known),
                iso(now),
            ],
        )


class Agents:
    """The statuses seen, by capability. `live` holds those received since this process
    started and committed (what the core acts on); `all` also the rows of earlier runs (what is
    shown); `pending` those taken in a transaction not yet committed (`commit` after it; a
    rollback's `load` drops them)."""

    def __init__(self, *, db: Database) -> None:
        self.store = AgentStore(db=db)
        self.max_unknown = MAX_UNKNOWN
        self.all: dict[str, Agent] = {}
        self.live: dict[str, Agent] = {}
        self.pending: dict[str, Agent] = {}

    def load(self) -> None:
        self.all = {a.capability_id: a for a in self.store.list()} | self.live
        self.pending.clear()

    def current(self, capability_id: str) -> Agent | None:
        """The last status taken in this run, committed or not."""
        return self.pending.get(capability_id) or self.live.get(capability_id)

    def room_for(self, capability_id: str, known: bool) -> bool:
        """A status of this capability may be kept: one of the catalog, one already kept, or
        one more while fewer than MAX_UNKNOWN others are."""
        if known or capability_id in self.all or capability_id in self.pending:
            return True
        others = {c for c, a in (self.all | self.pending).items() if not a.known}
        return len(others) < self.max_unknown

    def stale(self, capability_id: str, state: str, boot_id: str | None) -> bool:
        """An `offline` naming a boot other than the one this run last heard the agent under
        (an old boot's will delivered late, a forged status): it says nothing of the agent
        there now, and changes nothing (SPEC 4.8). The first status of a run is never stale:
        a retained one is the newest on its topic."""
        current = self.current(capability_id)
        return (
            state == "offline"
            and boot_id is not None
            and current is not None
            and current.boot_id is not None
            and current.boot_id != boot_id
        )

    def seen(self) -> set[str]:
        return set(self.live) | set(self.pending)

    def take(
        self,
        capability_id: str,
        state: str,
        boot_id: str | None,
        tasks: tuple[str, ...],
        ts: str | None,
        known: bool,
        now: datetime,
    ) -> tuple[Agent, bool]:
        """The agent as this status leaves it, and whether its state or boot changed (a status
        unlike the last one seen in this run, or the first one). Written inside the caller's
        transaction; the caller calls `commit(agent)` once it committed."""
        current = self.current(capability_id)
        before = current or self.all.get(capability_id)
        changed = (
            current is None or before is None or (before.state, before.boot_id) != (state, boot_id)
        )
        moved = before is None or (before.state, before.boot_id) != (state, boot_id)
        since = iso(now) if moved or before is None else before.since
        agent = Agent(capability_id, state, boot_id, since, tasks, ts, known)
        if before is None or replace(before, ts=agent.ts) != agent:  # a new `ts` alone: no write
            self.store.save(agent, now)
        self.pending[capability_id] = agent
        return agent, changed

    def commit(self, agent: Agent) -> None:
        self.all[agent.capability_id] = agent
        self.live[agent.capability_id] = agent
        if self.pending.get(agent.capability_id) is agent:
            del self.pending[agent.capability_id]

    def views(self) -> list[dict[str, Any]]:
        return [self.all[c].view() for c in sorted(self.all)]
