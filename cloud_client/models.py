"""Pydantic wire models of SPEC §3.1. Cloud responses allow extra fields (the cloud evolves)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Response(BaseModel):
    model_config = ConfigDict(extra="allow")


class SyncWire(_Response):
    cursor: str
    version: str


class ShortTermPairWire(_Response):
    user_text: str = ""
    assistant_text: str = ""
    route_family: str = ""
    workflow_id: str = ""


class ProfileCandidateWire(_Response):
    key: str = Field(min_length=1, max_length=128)
    value: Any
    category: str | None = None
    confidence: float | None = Field(None, ge=0, le=1)
    evidence_kind: Literal["mention", "suggestion_accepted"] = "mention"


class WriteCandidatesWire(_Response):
    short_term_pair: ShortTermPairWire | None = None
    profile_candidates: list[ProfileCandidateWire] = []


class DeviceCacheUpdateWire(_Response):
    active_workflow_id: str = ""
    last_route: str = ""
    session_summary: str = ""


class MemoryUpdateWire(_Response):
    contract_version: str = "a2a-memory-context-v1"
    source: str = ""
    sync: SyncWire | None = None
    write_candidates: WriteCandidatesWire = WriteCandidatesWire()
    device_cache_update: DeviceCacheUpdateWire = DeviceCacheUpdateWire()


class TurnResponse(_Response):
    request_id: str
    route_family: str = Field(min_length=1, max_length=32)
    assistant_text: str = Field(max_length=8000)
    device_task_requests: list[dict[str, Any]] = []
    device_workflow_requests: list[dict[str, Any]] = []
    memory_update: MemoryUpdateWire | None = None


class VoiceContext(BaseModel):
    recognized_text: str
    session_id: str
    last_route: str
    active_workflow_id: str
    memory_snapshot: dict[str, Any]


class TurnRequest(BaseModel):
    request_id: str
    device_id: str
    recognized_text: str
    voice_context: VoiceContext
    device_context: dict[str, Any]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SnapshotPair(_Strict):
    user: str
    assistant: str
    route_family: str | None = None


class SnapshotShortTerm(_Strict):
    recent_pairs: list[SnapshotPair]
    session_summary: str


class SnapshotDaily(_Strict):
    day: str
    summary: str


class SnapshotMidTerm(_Strict):
    daily_summaries: list[SnapshotDaily]
    weekly_digest: str


class SnapshotProfileItem(_Strict):
    key: str
    value: Any
    category: str | None = None
    confidence: float | None = None


class SnapshotLongTerm(_Strict):
    profile_items: list[SnapshotProfileItem]


class MemorySnapshot(_Strict):
    """The exact shape of SPEC §5.2 (`a2a-memory-context-v1`), nothing more."""

    source: Literal["ondevice_cache"]
    short_term: SnapshotShortTerm
    mid_term: SnapshotMidTerm
    long_term: SnapshotLongTerm
    sync: SyncWire


class DailySummaryWire(_Response):
    day: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    summary: str
    summary_id: str | None = None
    source_session_ids: list[str] = []
    expire_at: str | None = None


class WeeklyDigestWire(_Response):
    week: str = Field(pattern=r"^\d{4}-W\d{2}$")
    digest: str
    digest_id: str | None = None
    source_summary_ids: list[str] = []
    expire_at: str | None = None


class ProfileItemWire(_Response):
    key: str = Field(min_length=1, max_length=128)
    value: Any
    category: str | None = None
    confidence: float | None = Field(None, ge=0, le=1)
    relevance_score: float | None = Field(None, ge=0, le=1)
    status: Literal["confirmed"] = "confirmed"
    expire_at: str | None = None
    source_candidate_ids: list[str] = []
    source_summary_ids: list[str] = []
    source_session_ids: list[str] = []
    source_pair_ids: list[str] = []


class SyncUpdates(_Response):
    """`updates` of a memory sync answer (SPEC §3.2)."""

    daily_summaries: list[DailySummaryWire] = []
    weekly_digest: WeeklyDigestWire | None = None
    profile_items: list[ProfileItemWire] = []
    deleted_profile_keys: list[str] = []
