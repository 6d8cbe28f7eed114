"""Which session a turn belongs to (pure)."""

from __future__ import annotations

from datetime import datetime

from a2a_common.clock import parse_iso
from cache.model import SessionRow


def choose_session(
    requested: str | None,
    current: SessionRow | None,
    now: datetime,
    idle_s: int,
    fresh_id: str,
) -> str:
    """The turn's own session id wins; else the current one until `idle_s` of silence."""
    if requested:
        return requested
    if current is not None and (now - parse_iso(current.last_turn_at)).total_seconds() < idle_s:
        return current.session_id
    return fresh_id
