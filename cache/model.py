"""Plain read-only values the pure functions of the cache take and return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


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
    updated: str = ""  # ISO instant it was last confirmed or changed (recency)


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


@dataclass(frozen=True)
class CacheCounts:
    """How many rows each tier holds (for the CLI's views and the metrics)."""

    pairs: int
    pairs_unsynced: int
    turns_pending: int  # utterances recorded, never answered
    sessions: int
    daily_summaries: int
    weekly_digests: int


EvidenceKind = Literal["mention", "suggestion_accepted"]
ItemStatus = Literal["candidate", "suggestable", "confirmed", "revoked"]


@dataclass(frozen=True)
class Evidence:
    """One turn's support for a profile key/value (a `source candidate`)."""

    candidate_id: str
    pair_id: str
    session_id: str
    day: str  # local calendar day, YYYY-MM-DD
    kind: EvidenceKind
    created_at: str = ""  # ISO instant it arrived


@dataclass(frozen=True)
class CandidateIn:
    """A profile candidate as offered (by the planner or the device's own observation)."""

    key: str
    value: Any
    category: str | None = None
    confidence: float | None = None
    evidence_kind: EvidenceKind = "mention"


@dataclass(frozen=True)
class PromotionPolicy:
    min_mentions: int = 3
    min_days: int = 3
    auto_confirm_days: int = 7
    window_days: int = 14  # evidence older than this many local days is not counted
    contest_mentions: int = 2  # contrary evidence that contests a confirmed value ...
    contest_days: int = 2  # ... on this many distinct days, within the window
