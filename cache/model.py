"""Plain read-only values the pure functions of the cache take and return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SyncPosition:
    cursor: str = ""
    version: str = ""


@dataclass(frozen=True)
class PairView:
    user: str
    assistant: str
    route_family: str | None = None


@dataclass(frozen=True)
class DailySummary:
    day: str
    summary: str


@dataclass(frozen=True)
class ProfileView:
    key: str
    value: Any
    category: str | None = None
    confidence: float | None = None
    relevance: float = 0.0


@dataclass(frozen=True)
class CacheView:
    """What the snapshot builder reads: already filtered (expired, revoked, unconsented gone)."""

    recent_pairs: tuple[PairView, ...] = ()  # oldest first
    session_summary: str = ""
    daily_summaries: tuple[DailySummary, ...] = ()  # newest first
    weekly_digest: str = ""
    profile_items: tuple[ProfileView, ...] = ()  # most relevant first
    sync: SyncPosition = field(default_factory=SyncPosition)


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    last_turn_at: str  # ISO instant
