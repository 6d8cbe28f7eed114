"""Applying the planner's memory update of SPEC §5.3 (pure: decides, the store writes)."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from cache.model import CandidateIn, SyncPosition

_VERSION = re.compile(r"^v(\d{1,32})$")
MAX_VERSION = 2**31 - 1
MAX_VERSION_STEP = 1_000_000


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
    pair_category: str | None = None  # the cloud's `short_term_pair.category`
    session_summary_category: str | None = None  # `device_cache_update.session_summary_category`


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
    sync_refused: str | None = None  # why the offered sync position was not adopted
    pair_category: str | None = None
    session_summary_category: str | None = None


def version_number(version: str) -> int | None:
    match = _VERSION.match(version)
    return int(match.group(1)) if match else None


def _ours(current: SyncPosition) -> int | None:
    """Our version as a number; one past the ceiling (adopted before there was one) counts as
    unreadable, so that the next sane version is adopted again."""
    ours = version_number(current.version)
    return ours if ours is not None and ours <= MAX_VERSION else None


def sync_refusal(
    current: SyncPosition, offered: SyncPosition, *, force: bool = False
) -> str | None:
    """Why an offered version must not be adopted, or None: behind ours (unless forced), or
    not a step the cloud can have taken. A version is a counter of the cloud's changes for
    this device: one past `MAX_VERSION` (2^31 - 1), or more than
    `MAX_VERSION_STEP` above ours, is not a step the cloud can have taken; adopting it would
    make every later, normal version look like a step backwards (SPEC §5.3), for good. A forced
    position (a 409's, the server's truth) may go backwards, never that far ahead."""
    theirs, ours = version_number(offered.version), _ours(current)
    if theirs is None:
        if force or ours is None:
            return None
        return f"version {offered.version!r} is not of the form vN (ours is {current.version})"
    if theirs > MAX_VERSION:
        return f"version {offered.version} is past the ceiling v{MAX_VERSION}"
    if ours is not None and theirs - ours > MAX_VERSION_STEP:
        return (
            f"version {offered.version} is more than {MAX_VERSION_STEP} ahead of"
            f" ours ({current.version})"
        )
    if not force and ours is not None and theirs < ours:
        # said like the others: a cloud that moves backwards is as wrong as a malformed one
        return f"version {offered.version} is behind ours ({current.version})"
    return None


def sync_to_adopt(current: SyncPosition, offered: SyncPosition | None) -> SyncPosition | None:
    """Adopt `offered` unless it would move the version backwards (`vN` compared by N) or is
    refused (`sync_refusal`). An offered version we cannot read is adopted only while ours is
    unreadable too."""
    if offered is None or offered == current or sync_refusal(current, offered):
        return None
    ours, theirs = _ours(current), version_number(offered.version)
    if ours is not None and theirs is not None and theirs < ours:
        return None
    return offered


def plan_update(
    update: UpdateInput, current_sync: SyncPosition, accepted_workflow_ids: Collection[str]
) -> UpdateChanges:
    """`accepted_workflow_ids` in the order the turn asked for them: the pair's `workflow_id`
    is the one the planner's `short_term_pair` named when the turn accepted it, else the
    turn's first accepted workflow, `""` only when it started none (docs/contract.md §3.2)."""
    ordered = (
        sorted(accepted_workflow_ids)
        if isinstance(accepted_workflow_ids, (set, frozenset))
        else list(accepted_workflow_ids)
    )
    if update.pair_workflow_id in ordered:
        workflow_id = update.pair_workflow_id
    else:
        workflow_id = ordered[0] if ordered else ""
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
        sync_refused=sync_refusal(current_sync, update.sync) if update.sync else None,
        pair_category=update.pair_category,
        session_summary_category=update.session_summary_category,
    )
