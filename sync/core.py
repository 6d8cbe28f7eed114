"""Replay decisions (pure): what a memory-sync answer means for the batch that was sent.

- 200: acked writes leave the outbox, rejected ones go to the dead letters, the rest stay;
  `updates` are applied and `sync` adopted (never backwards) in the same transaction.
- 409 `version_conflict`: apply `updates`, adopt the server's `sync` as it is, send the same
  batch again.
- another 4xx for the whole batch: one of its writes is poison. Halve the batch size until the
  batch is a single write, which is dead-lettered; the size resets after that. Writes before
  the poison are acked on the way, so order is kept and nothing behind it is blocked.
- 3xx: an error naming where it points (redirects are never followed: the device talks to
  the planner it was configured with).

An exchange that settles nothing — no write acked or dead-lettered, no conflict taken, no
halving towards a poison write — makes no `progress`: the replayer counts it as a failure
and backs off (a 200 `{"acked": []}` used to be sent again at once, ~22 times a second).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from cloud_client.models import SyncWire

REASON_MAX = 300  # characters of a dead letter's reason


@dataclass(frozen=True)
class Pending:
    write_id: str
    kind: str
    created_at: str
    payload: dict[str, Any]

    def wire(self) -> dict[str, Any]:
        return {
            "write_id": self.write_id,
            "kind": self.kind,
            "created_at": self.created_at,
            "payload": self.payload,
        }


@dataclass(frozen=True)
class Position:
    cursor: str
    version: str


@dataclass(frozen=True)
class Plan:
    ack: tuple[str, ...] = ()
    dead: tuple[tuple[str, str], ...] = ()
    unacked: tuple[str, ...] = ()  # sent, neither acked nor rejected: stay, attempts + 1
    updates: dict[str, Any] = field(default_factory=dict)
    sync: Position | None = None
    force_sync: bool = False  # a 409's sync is the server's truth, adopted even if lower
    resend: bool = False  # send the same batch again at once
    next_limit: int = 100
    error: str | None = None

    @property
    def progress(self) -> bool:
        """Something was settled (or a bounded step towards it): not a failed exchange."""
        return bool(self.ack or self.dead or self.resend)


class _Rejected(BaseModel):
    model_config = ConfigDict(extra="allow")
    write_id: str
    reason: str = "rejected"


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")
    sync: SyncWire | None = None
    acked: list[str] = []
    rejected: list[_Rejected] = []
    updates: dict[str, Any] = {}


def _position(raw: Any) -> Position | None:
    try:
        wire = SyncWire.model_validate(raw)
    except ValidationError:
        return None
    return Position(wire.cursor, wire.version)


def plan_answer(
    batch: Sequence[Pending],
    status: int,
    body: Any,
    *,
    limit: int,
    batch_size: int,
    location: str | None = None,
) -> Plan:
    """What to do after the cloud answered `status` with `body` to `batch` (`location`: the
    Location header of a redirect)."""
    ids = [w.write_id for w in batch]
    if 300 <= status < 400:
        where = f"redirect to {location}" if location else "redirect (not followed)"
        return Plan(unacked=tuple(ids), next_limit=limit, error=f"HTTP {status} {where}")
    if status == 409:
        if not isinstance(body, dict) or body.get("error") != "version_conflict":
            return Plan(unacked=tuple(ids), next_limit=limit, error="409 without version_conflict")
        return Plan(
            updates=body.get("updates") or {},
            sync=_position(body.get("sync")),
            force_sync=True,
            resend=True,
            next_limit=limit,
        )
    if status >= 400:
        reason = _reason(body, status)
        if len(batch) == 1:
            return Plan(dead=((ids[0], reason),), next_limit=batch_size, error=reason)
        return Plan(resend=True, next_limit=max(1, len(batch) // 2), error=reason)
    try:
        answer = _Answer.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        error = f"sync answer is not the contract: {where}: {err['msg']}"
        return Plan(unacked=tuple(ids), next_limit=limit, error=error)
    sent = set(ids)
    acked = [w for w in ids if w in set(answer.acked)]
    dead = [(r.write_id, r.reason[:REASON_MAX]) for r in answer.rejected if r.write_id in sent]
    settled = set(acked) | {w for w, _ in dead}
    return Plan(
        ack=tuple(acked),
        dead=tuple(dead),
        unacked=tuple(w for w in ids if w not in settled),
        updates=answer.updates,
        sync=Position(answer.sync.cursor, answer.sync.version) if answer.sync else None,
        next_limit=limit if limit < batch_size and not dead else batch_size,
        error=None if settled else f"sync answer settled none of the {len(ids)} writes sent",
    )


def _reason(body: Any, status: int) -> str:
    if isinstance(body, dict):
        for key in ("reason", "detail", "error"):
            if isinstance(body.get(key), str):
                return f"HTTP {status}: {body[key]}"[:REASON_MAX]
    return f"HTTP {status}"
