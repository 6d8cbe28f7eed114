"""What `a2a-edge console` shows, read from the state DB opened read-only (edge/views/state.py): the
workflows and their timelines, memory, sync, health and consent — JSON-able dicts, nothing
written. The privacy policy decides which user words may be shown: a profile item whose
category the snapshot would not carry is shown as withheld, with why, never with its value."""

from __future__ import annotations

import json
import os
from typing import Any

from a2a_common.clock import SystemClock
from a2a_common.jsonx import canonical
from a2a_common.people import HOUSEHOLD
from cache import Memory, value_key
from edge.config.policies import privacy_policy
from edge.config.settings import Settings
from edge.views import state as views

STATUSES = ("candidate", "suggestable", "confirmed", "contested", "superseded", "revoked")
UTTERANCE_MAX = 500  # characters of a typed utterance; longer ones are refused

# the seed's Text-Console order (seed 003): a timeline entry's kind -> its phase
PHASES = (
    "admission",
    "activation",
    "binding",
    "steps",
    "callbacks",
    "decision",
    "terminal",
)


def workflows(settings: Settings, limit: int = 50) -> list[dict[str, Any]]:
    return views.workflows_list(settings, limit)


def workflow(settings: Settings, workflow_id: str) -> dict[str, Any] | None:
    """`workflows trace`'s view (already in the seed's order), each entry with its phase."""
    trace = views.workflow_trace(settings, workflow_id)
    if trace is None:
        return None
    for entry in trace["timeline"]:
        entry["phase"] = phase_of(entry)
    return trace


PHASE_OF_KIND = {
    "request": "admission",
    "accepted": "admission",
    "rejected": "admission",
    "experience_activation": "activation",
    "experience_mode": "activation",
    "goal": "binding",
    "plan": "binding",
    "observation": "callbacks",
    "presence": "callbacks",  # an agent's status that ended (or kept) a step (SPEC 4.8)
    "evidence": "callbacks",
    "evidence_dropped": "callbacks",
    "decision": "decision",
    "decision_requested": "decision",
    "replan_refused": "decision",
    "ask_expired": "decision",
    "criteria": "terminal",
    "criteria_unmet": "terminal",
    "cancel": "terminal",
    "finished": "terminal",
}


def phase_of(entry: dict[str, Any]) -> str:
    """Which of the seed's phases a timeline entry belongs to (a label on the page; the
    entries keep the trace's own order)."""
    status = str(entry.get("status", ""))
    if status == "WORKFLOW_ACCEPTED":
        return "admission"
    if status.startswith("WORKFLOW_"):  # completed, failed, cancelled, rejected
        return "terminal"
    return PHASE_OF_KIND.get(str(entry.get("kind", "")), "steps")


def planner_snapshot(memory: Memory, utterance: str) -> dict[str, Any]:
    """THE one call of the snapshot builder: the snapshot the planner would get now for
    `utterance` (the next turn's, without its own session id), focused on what the utterance
    names (SPEC 5.2) with the retained device context — nowhere else builds a snapshot for the
    page."""
    context = memory.state("device_context", {})
    return dict(memory.snapshot_for(utterance, context if isinstance(context, dict) else {}))


def snapshot(settings: Settings, utterance: str) -> dict[str, Any]:
    with views.readonly_db(settings) as db:
        memory = views._memory(db, settings)
        shown = planner_snapshot(memory, utterance)
    return {"utterance": utterance, "snapshot": shown, "bytes": len(canonical(shown))}


def _withheld_reason(settings: Settings, category: str | None, consented: frozenset[str]) -> str:
    policy = privacy_policy(settings)
    if policy.visible(category, consented):
        return ""
    if policy.is_sensitive(category):
        return f"category {category} is sensitive and has no consent grant"
    return f"the privacy policy does not share category {category}"


def memory(settings: Settings) -> dict[str, Any]:
    """Profile items by status with their evidence (mentions and distinct days, per key and
    value, inside `memory.promotion.window_days` as promotion counts them), provenance ids
    (never texts), and a withheld value where the privacy policy keeps the category out of a
    snapshot."""
    shown = views.memory_show(settings)
    # SPEC 5.7: a person's item is shown under that person's grants, the household's under its
    grants: dict[str, set[str]] = {}
    for g in consent(settings)["grants"]:
        if g["scope"].startswith("category:"):
            grants.setdefault(g.get("person", HOUSEHOLD), set()).add(g["scope"].split(":", 1)[1])
    consented = frozenset(grants.get(HOUSEHOLD, set()))
    by_status: dict[str, list[dict[str, Any]]] = {s: [] for s in STATUSES}
    with views.readonly_db(settings) as db:
        mem = views._memory(db, settings)
        counts = {
            (r["person_id"], r["key"], r["value"]): mem.profile.window_counts(r)
            for r in mem.profile.items()
        }
        promotion = mem.policy.promotion
    for item in shown["profile_items"]:
        whose = item["person_id"]
        mentions, days = counts.get((whose, item["key"], value_key(item["value"])), (0, 0))
        held = frozenset(grants.get(whose, set()))
        reason = _withheld_reason(settings, item["category"], held)
        if reason:
            item["value"] = None
            item["withheld"] = reason
        item["evidence_days"], item["window_mentions"] = days, mentions
        by_status.setdefault(item.get("state", item["status"]), []).append(item)  # by state
    return {
        "tiers": shown["tiers"],
        "people": shown["people"],  # per person: pairs, sessions, summaries, items (SPEC 5.7)
        "promotion": {
            "min_mentions": promotion.min_mentions,
            "min_days": promotion.min_days,
            "window_days": promotion.window_days,
        },
        "by_status": by_status,
        "blocked_categories": privacy_policy(settings).blocked(consented),
    }


def consent(settings: Settings) -> dict[str, Any]:
    from edge.host.clock import runtime_clock
    from edge.store.consent import ConsentRegister

    with views.readonly_db(settings) as db:
        register = ConsentRegister(
            db=db,
            clock=runtime_clock(os.environ),
            categories=settings.privacy.consented_categories,
            capabilities=settings.privacy.consented_capabilities,
        )
        return {"grants": [g.wire() for g in register.held()], "audit": register.audit(20)}


def sync(settings: Settings) -> dict[str, Any]:
    from sync import SyncOutbox

    shown = views.sync_status(settings)
    with views.readonly_db(settings) as db:
        outbox = SyncOutbox(db=db, clock=SystemClock())
        shown["dead"] = outbox.dead_listing(20)
    # the inbound dead letters: topic, size and error (their payloads are not shown)
    shown["inbox_dead"] = [
        {k: row.get(k) for k in ("id", "received_at", "bytes", "topic", "error")}
        for row in views.inbox_dead(settings, 20)
    ]
    return shown


def health(settings: Settings) -> dict[str, Any]:
    keys = (
        "service",
        "health",
        "last_seen",
        "heartbeat_age_s",
        "broker",
        "cloud",
        "loop_lag_ms",
        "experience_mode",
        "db_bytes",
        "wal_bytes",
        "problems",
        "agents",  # SPEC 4.8: every agent's last status
    )
    shown = views.status(settings)
    return {k: shown.get(k) for k in keys}


def overview(settings: Settings) -> dict[str, Any]:
    """Everything the page shows but a timeline and the snapshot: one read per refresh."""
    return {
        "workflows": workflows(settings),
        "memory": memory(settings),
        "sync": sync(settings),
        "health": health(settings),
        "consent": consent(settings),
    }


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
