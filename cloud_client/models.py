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
