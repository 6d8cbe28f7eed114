"""Promotion of profile candidates (SPEC §5.4), pure and deterministic.

Evidence is counted once per source pair. A candidate is *suggestable* at `min_mentions` on
`min_days` distinct local days; it is *confirmed* by a `suggestion_accepted` that arrives while
it is already suggestable, or by itself at `auto_confirm_days` distinct days. Confirmed and
revoked items are not moved by evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cache.model import CandidateIn, Evidence, EvidenceKind, ItemStatus, PromotionPolicy
from cache.revision import window_start


def next_status(
    status: ItemStatus,
    mentions: int,
    days: int,
    arriving: EvidenceKind,
    policy: PromotionPolicy,
) -> ItemStatus:
    """The status once the arriving evidence is counted: `mentions` evidence rows (one per
    source pair) on `days` distinct local days, the arriving one included."""
    if status in ("confirmed", "revoked"):
        return status
    if arriving == "suggestion_accepted" and status == "suggestable":
        return "confirmed"
    if days >= policy.auto_confirm_days:
        return "confirmed"
    if mentions >= policy.min_mentions and days >= policy.min_days:
        return "suggestable"
    return status


@dataclass(frozen=True)
class StepOutcome:
    capability_id: str
    operation_id: str
    status: str
    args: dict[str, Any]


def observed_candidates(steps: Sequence[StepOutcome]) -> list[CandidateIn]:
    """The device's own evidence: purification COMPLETED after a move COMPLETED to a room is a
    mention of `preferred_room` = that room."""
    room: str | None = None
    found: list[CandidateIn] = []
    for step in steps:
        if step.status != "COMPLETED":
            continue
        if (step.capability_id, step.operation_id) == ("mobility", "move_to_room"):
            value = step.args.get("room")
            room = value if isinstance(value, str) and value else None
        elif (step.capability_id, step.operation_id) == ("air_purifier", "start") and room:
            found.append(CandidateIn("preferred_room", room, "device_pattern"))
            room = None
    return found


def replay_status(evidence: Sequence[Evidence], policy: PromotionPolicy) -> ItemStatus:
    """The status the evidence earns when counted again in order (after some of it was
    forgotten): an acceptance confirms only if the item was suggestable when it arrived, and
    each arrival counts only the evidence inside the window as it stood that day."""
    status: ItemStatus = "candidate"
    for index, item in enumerate(evidence):
        first = window_start(item.day, policy)
        live = [e for e in evidence[: index + 1] if e.day >= first]
        days = len({e.day for e in live})
        status = next_status(status, len(live), days, item.kind, policy)
    return status
