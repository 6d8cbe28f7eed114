"""Promotion of profile candidates (SPEC §5.4), pure and deterministic.

Evidence is counted once per source pair, and only inside the window (SPEC §5.4). A candidate
is *suggestable* at `min_mentions` on `min_days` distinct local days; it is *confirmed* by a
`suggestion_accepted` that arrives while it is suggestable — judged at the acceptance, on the
evidence before it that is still inside the window (not on the status stored when that
evidence was fresh: mentions on three days and an acceptance a month later confirm nothing) —
or by itself at `auto_confirm_days` distinct days. A suggestable candidate whose evidence left
the window is a candidate again. Confirmed and revoked items are not moved by evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cache.model import CandidateIn, Evidence, EvidenceKind, ItemStatus, PromotionPolicy
from cache.revision import window_start

Counts = tuple[int, int]  # (evidence rows, one per source pair; distinct local days)


def is_suggestable(counts: Counts, policy: PromotionPolicy) -> bool:
    mentions, days = counts
    return mentions >= policy.min_mentions and days >= policy.min_days


def next_status(
    status: ItemStatus,
    before: Counts,
    after: Counts,
    arriving: EvidenceKind,
    policy: PromotionPolicy,
) -> ItemStatus:
    """The status once the arriving evidence is counted. `before`: the evidence inside the
    window without the arriving turn's; `after`: with it. An acceptance confirms when
    `before` makes the candidate suggestable now."""
    if status in ("confirmed", "revoked"):
        return status
    if arriving == "suggestion_accepted" and is_suggestable(before, policy):
        return "confirmed"
    if after[1] >= policy.auto_confirm_days:
        return "confirmed"
    return "suggestable" if is_suggestable(after, policy) else "candidate"


def window_counts(evidence: Sequence[Evidence], today: str, policy: PromotionPolicy) -> Counts:
    """(rows, distinct days) of `evidence` inside the window that ends `today` (YYYY-MM-DD):
    the count promotion judges by, for a reader that has the rows (the console)."""
    first = window_start(today, policy)
    live = [e for e in evidence if first <= e.day <= today]
    return len(live), len({e.day for e in live})


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
        before = window_counts(evidence[:index], item.day, policy)
        after = window_counts(evidence[: index + 1], item.day, policy)
        status = next_status(status, before, after, item.kind, policy)
    return status
