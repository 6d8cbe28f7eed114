"""The planner's side of the memory contract, as the seed describes it."""

from __future__ import annotations

import copy
from typing import Any

CONTRACT = "a2a-memory-context-v1"


def normalize_memory_context(snapshot: dict[str, Any]) -> dict[str, Any]:
    """What the planner reads: the device snapshot tagged with the contract version and the rule
    that the current turn has priority over memory (the seed's normalized output)."""
    normalized: dict[str, Any] = {"contract_version": CONTRACT}
    normalized["source"] = snapshot.get("source", "ondevice_cache")
    normalized["current_turn_priority"] = "required"
    for tier in ("short_term", "mid_term", "long_term", "sync"):
        if tier in snapshot:
            normalized[tier] = copy.deepcopy(snapshot[tier])
    return normalized


def build_memory_update(
    *,
    recognized_text: str,
    route_family: str,
    workflow_id: str,
    sync: dict[str, str],
    session_summary: str = "",
    profile_candidates: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The runtime memory update of the seed: the pair (assistant text left for the device to
    fill), candidates, the device cache update and the sync position."""
    return {
        "contract_version": CONTRACT,
        "source": "cloud_a2a_runtime",
        "sync": sync,
        "write_candidates": {
            "short_term_pair": {
                "user_text": recognized_text,
                "assistant_text": "",
                "route_family": route_family,
                "workflow_id": workflow_id,
            },
            "profile_candidates": profile_candidates or [],
        },
        "device_cache_update": {
            "active_workflow_id": workflow_id,
            "last_route": route_family,
            "session_summary": session_summary,
        },
    }
