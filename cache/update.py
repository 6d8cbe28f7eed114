"""Applying the planner's memory update of SPEC §5.3 (pure: decides, the store writes)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cache.model import CandidateIn, SyncPosition

_VERSION = re.compile(r"^v(\d+)$")


@dataclass(frozen=True)
class UpdateInput:
    """The fields of a `memory_update` the device acts on, plus the turn's own result."""

    reply_text: str
    route_family: str
    pair_assistant_text: str = ""
    pair_route_family: str = ""
    pair_workflow_id: str = ""
    last_route: str = ""
    session_summary: str = ""
    active_workflow_id: str = ""
    sync: SyncPosition | None = None
    profile_candidates: tuple[CandidateIn, ...] = ()


@dataclass(frozen=True)
class UpdateChanges:
    assistant_text: str
    route_family: str | None
    workflow_id: str
    last_route: str | None  # None: keep what is stored
    session_summary: str | None
    active_workflow_id: str | None
    sync: SyncPosition | None
    profile_candidates: tuple[CandidateIn, ...] = ()


def version_number(version: str) -> int | None:
    match = _VERSION.match(version)
    return int(match.group(1)) if match else None


def sync_to_adopt(current: SyncPosition, offered: SyncPosition | None) -> SyncPosition | None:
    """Adopt `offered` unless it would move the version backwards (`vN` compared by N).

    An offered version we cannot read is adopted only while ours is unreadable too.
    """
    if offered is None or offered == current:
        return None
    ours, theirs = version_number(current.version), version_number(offered.version)
    if ours is None:
        return offered
    if theirs is None or theirs < ours:
        return None
    return offered


def plan_update(
    update: UpdateInput, current_sync: SyncPosition, accepted_workflow_ids: frozenset[str]
) -> UpdateChanges:
    workflow_id = (
        update.pair_workflow_id if update.pair_workflow_id in accepted_workflow_ids else ""
    )
    active = update.active_workflow_id
    return UpdateChanges(
        assistant_text=update.pair_assistant_text or update.reply_text,
        route_family=update.pair_route_family or update.route_family or None,
        workflow_id=workflow_id,
        last_route=update.last_route or None,
        session_summary=update.session_summary or None,
        active_workflow_id=active if active and active in accepted_workflow_ids else None,
        sync=sync_to_adopt(current_sync, update.sync),
        profile_candidates=update.profile_candidates,
    )
