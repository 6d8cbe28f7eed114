"""Read-only views of the state DB for the CLI (safe while the service runs: WAL readers).

Each package owns its tables: these views read through the owning stores (CacheStore,
WorkflowStore, SyncOutbox, the MQTT DurableOutbox), never with SQL of their own."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from a2a_common.clock import SystemClock, iso, parse_iso, seconds_between
from a2a_common.db import Database
from a2a_common.jsonx import canonical
from a2a_common.people import HOUSEHOLD
from a2a_common.sqlite import open_readonly, schema_version
from cache import SYNC_REFUSED, CacheStore, Memory, list_pairs, list_sessions, state_of
from edge.config.service_view import service_settings
from edge.config.settings import Settings
from edge.host import statelock
from edge.host.beatfile import read_beat
from edge.store.inbox import InboxDeadLetters
from edge.store.outbound import DurableOutbox
from edge.store.schema import MIGRATIONS
from sync import SyncOutbox
from taskmanager import AgentStore, WorkflowStore

HEARTBEAT_STALE_S = 15.0  # the runtime beats every 5 s


@contextmanager
def readonly_db(settings: Settings) -> Iterator[Database]:
    db = open_readonly(settings.state_db_path, len(MIGRATIONS))
    try:
        yield db
    finally:
        db.close()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def status(settings: Settings) -> dict[str, Any]:
    with readonly_db(settings) as db:
        cache = CacheStore(db=db)
        counts = cache.counts()
        position = cache.sync_position()
        sync_outbox = SyncOutbox(db=db, clock=SystemClock())
        beat = _newest(cache.state("runtime_heartbeat", {}), settings)
        age, offset = None, _clock_offset(beat)
        if beat.get("ts"):  # on the host's clock: the beat's time less the service's offset
            seen = parse_iso(beat["ts"]) - timedelta(seconds=offset)
            age = round((SystemClock().now() - seen).total_seconds(), 1)
        db_bytes = sum(
            p.stat().st_size
            for p in settings.state_db_path.parent.glob(settings.state_db_path.name + "*")
        )
        running, health = _service_state(settings, age, beat)
        ours = service_settings(settings)  # from the config and environment this command has
        theirs = beat.get("settings") if running else None
        used = theirs if isinstance(theirs, dict) else ours
        return {
            "service": "running" if running else "not running",
            "ready": running and _ready(settings, beat),  # READY=1 sent (`status --wait-ready`)
            "health": health,
            "problems": beat.get("problems", []) if running else [],
            # SPEC 4.2: a cancel whose body was never confirmed stopped (the heartbeat's)
            "alarm": beat.get("alarm") if running else None,
            "last_seen": beat.get("ts"),  # the heartbeat's time: what follows is as of then
            "heartbeat_age_s": age,
            # the service's clock less the host's at its last beat: a demo's or a test's offset
            # clock, a wall clock stepped since it started (last_seen is on the service's clock)
            "service_clock_offset_s": offset,
            "broker": beat.get("broker", "unknown"),
            "cloud": beat.get("cloud", "unknown"),
            # the running service's own (its heartbeat's: its environment, a reload), else the
            # config this command reads; `config_differs` names what the two disagree on
            "cloud_tls": used.get("cloud_tls", ours["cloud_tls"]),
            "settings_from": "service" if used is theirs else "this command's config",
            "settings": used,
            "config_differs": sorted(k for k, v in ours.items() if used.get(k, v) != v),
            "loop_lag_ms": beat.get("loop_lag_ms"),
            "active_workflows": WorkflowStore(db=db).active_count(),
            # SPEC 4.7: the running service's (a SIGHUP may have changed it), else the config's
            "experience_mode": beat.get("experience_mode", settings.experience.mode)
            if running
            else settings.experience.mode,
            "db_bytes": db_bytes,
            "wal_bytes": _size(
                settings.state_db_path.with_name(settings.state_db_path.name + "-wal")
            ),
            "wal_residue": bool(beat.get("wal_residue", False)),  # a forget's pages, retried
            "wal_blocked_s": beat.get("wal_blocked_s"),  # a reader keeps checkpoints from it
            "wal_error": beat.get("wal_error"),  # checkpoints fail: a full disk, an I/O error
            "device_id": settings.device_id,
            "state_db": str(settings.state_db_path),
            "schema_version": schema_version(db),
            "pairs": counts.pairs,
            "sessions": counts.sessions,
            "turns_pending": counts.turns_pending,
            # SPEC 5.7: per person (and the household): pairs, sessions, summaries, items
            "people": cache.people_counts(),
            "mqtt_outbox": DurableOutbox(db=db, clock=SystemClock()).pending(),
            "sync_outbox": sync_outbox.pending(),
            "sync_dead_letters": sync_outbox.dead_count(),
            # the cloud answers without settling anything (a stall), since when, and why
            "sync_stalled_since": sync_outbox.meta("stalled_since"),
            "sync_last_error": sync_outbox.meta("last_error"),
            "inbox_dead_letters": InboxDeadLetters(db=db, clock=SystemClock(), keep=0).count(),
            "sync": {"cursor": position.cursor, "version": position.version},
            # SPEC 4.8: every agent's last status (state, boot, since when, tasks held)
            "agents": [a.view() for a in AgentStore(db=db).list()],
        }


def _clock_offset(beat: dict[str, Any]) -> float:
    """The heartbeat's `clock_offset_s` (0 from a service before it, or a value not a number)."""
    value = beat.get("clock_offset_s")
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return 0.0


def _newest(in_db: Any, settings: Settings) -> dict[str, Any]:
    """The newer of the DB's heartbeat and the heartbeat file's (edge/host/beatfile.py): on a
    full disk only the file is written, and the service is shown `degraded` with its reasons
    rather than `unknown`."""
    beats = [b for b in (in_db, read_beat(settings.state_db_path.parent)) if isinstance(b, dict)]
    dated = []
    for beat in beats:
        try:
            dated.append((parse_iso(str(beat.get("ts"))), beat))
        except ValueError:
            continue
    return max(dated, key=lambda pair: pair[0])[1] if dated else {}


def _service_state(settings: Settings, age: float | None, beat: dict[str, Any]) -> tuple[bool, str]:
    """Running means a `run` holds the state dir's lock (the kernel drops it when the process
    ends, so a stopped or killed service is never shown as running from a fresh heartbeat);
    its health is the heartbeat's, `unknown` while that is older than three beats (a service
    that is starting, or whose loop is stuck)."""
    holder = statelock.held_by(settings.state_db_path.parent)
    if holder is None or holder.role != statelock.SERVICE:
        return False, "-"
    if age is None or age >= HEARTBEAT_STALE_S:
        return True, "unknown"
    return True, str(beat.get("health", "ok"))


def _ready(settings: Settings, beat: dict[str, Any]) -> bool:
    """The running service has sent READY=1 (its subscriptions are held by the broker): its
    own heartbeat says so, not one a previous run left."""
    holder = statelock.held_by(settings.state_db_path.parent)
    return holder is not None and beat.get("ready") is True and beat.get("pid") == holder.pid


def pairs(
    settings: Settings, limit: int, session_id: str | None = None, person: str | None = None
) -> list[dict[str, Any]]:
    with readonly_db(settings) as db:
        return list_pairs(db, limit, session_id, person)


def sessions(settings: Settings, limit: int, person: str | None = None) -> list[dict[str, Any]]:
    with readonly_db(settings) as db:
        return list_sessions(db, limit, person)


def inbox_dead(settings: Settings, limit: int = 100) -> list[dict[str, Any]]:
    """Inbound messages a handler failed on, newest first (SPEC §2.4)."""
    with readonly_db(settings) as db:
        return InboxDeadLetters(db=db, clock=SystemClock(), keep=0).listing(limit)


def _memory(db: Database, settings: Settings) -> Memory:
    from edge.config.policies import memory_policy
    from edge.store.consent import ConsentRegister

    # the register's grants too: a preview is what the next turn would send (SPEC 5.6, 5.7)
    register = ConsentRegister(db=db, clock=SystemClock())
    return Memory(
        db=db, clock=SystemClock(), policy=memory_policy(settings), consents=register.categories
    )


def _why(row: dict[str, Any], memory: Memory) -> str:
    """Why an item is not what its status alone says (SPEC §5.4), naming the other value."""

    def value_of(item_id: str) -> str:
        found = [r["value"] for r in memory.profile.items(row["key"]) if r["item_id"] == item_id]
        return found[0] if found else item_id

    if row["status"] == "confirmed" and row["contested_by"]:
        return f"contested by {value_of(row['contested_by'])}: left out of the snapshot"
    if row["status"] != "confirmed" and row["superseded_by"]:
        return f"superseded by {value_of(row['superseded_by'])} at {row['superseded_at']}"
    return ""


def memory_show(settings: Settings, person: str | None = None) -> dict[str, Any]:
    """Everything the cache holds, or (`person`, SPEC 5.7) one person's memory only."""
    with readonly_db(settings) as db:
        memory = _memory(db, settings)
        latest = memory.store.latest_session(person or HOUSEHOLD)
        items = [
            {
                "person_id": row["person_id"],
                "key": row["key"],
                "value": json.loads(row["value"]),
                "status": row["status"],
                "state": state_of(row["status"], row["contested_by"], row["superseded_by"]),
                "why": _why(row, memory),
                "category": row["category"],
                "confidence": row["confidence"],
                "relevance_score": row["relevance_score"],
                "sensitive": bool(row["sensitive"]),
                "expire_at": row["expire_at"],
                "origin": row["origin"],
                "mentions": len(memory.profile.evidence(row["item_id"])),
                "sources": {
                    name: json.loads(row[f"source_{name}_ids"])
                    for name in ("candidate", "summary", "session", "pair")
                },
            }
            for row in memory.profile.items(person=person)
        ]
        by_status: dict[str, int] = {}
        for item in items:
            by_status[item["status"]] = by_status.get(item["status"], 0) + 1
        counts = memory.store.counts()
        tiers: dict[str, Any] = {
            "pairs": counts.pairs,
            "pairs_unsynced": counts.pairs_unsynced,
            "sessions": counts.sessions,
            "daily_summaries": counts.daily_summaries,
            "weekly_digests": counts.weekly_digests,
        }
        people = memory.store.people_counts()
        if person is not None:  # one person's rows only
            tiers = {k: v for k, v in people.get(person, {}).items() if k != "profile_items"}
            tiers = {"pairs": 0, "sessions": 0, "daily_summaries": 0} | tiers
        return {
            **({"person": person} if person is not None else {"people": people}),
            "tiers": tiers | {"profile_items": by_status},
            "current_session": latest.session_id if latest else None,
            "device_state": {
                key: memory.state(key)
                for key in ("last_route", "active_workflow_id", "device_context")
            },
            "sync": {
                "cursor": memory.sync_position().cursor,
                "version": memory.sync_position().version,
            },
            "profile_items": items,
        }


def memory_snapshot(
    settings: Settings, utterance: str | None = None, person: str = HOUSEHOLD
) -> tuple[dict[str, Any], int]:
    """The snapshot `person`'s next turn would send (without its own session id) and its byte
    size; with `utterance`, the one a turn with those words would send (the retained device
    context)."""
    with readonly_db(settings) as db:
        memory = _memory(db, settings)
        session = memory.session_for(None, memory.now(), person)
        context = memory.state("device_context", {}) if utterance is not None else None
        context = context if isinstance(context, dict) else {}
        snapshot = memory.snapshot(session, utterance, context, person)
        return snapshot, len(canonical(snapshot))


def workflows_list(settings: Settings, limit: int = 50) -> list[dict[str, Any]]:
    with readonly_db(settings) as db:
        return WorkflowStore(db=db).listing(limit)


def workflow_trace(settings: Settings, workflow_id: str) -> dict[str, Any] | None:
    with readonly_db(settings) as db:
        store = WorkflowStore(db=db)
        doc = store.get(workflow_id)
        if doc is None:
            return None
        return {"workflow": doc, "timeline": store.timeline(workflow_id)}


def sync_status(settings: Settings) -> dict[str, Any]:
    with readonly_db(settings) as db:
        outbox = SyncOutbox(db=db, clock=SystemClock())
        cache = CacheStore(db=db)
        position = cache.sync_position()
        sync = settings.sync
        stalled = outbox.meta("stalled_since")
        stall = [f"sync makes no progress since {stalled}"] if stalled else []
        return {
            "pending": outbox.pending(),
            # as of the last heartbeat (a running service's; kept in memory, never in a row)
            "in_flight": int(cache.state("runtime_heartbeat", {}).get("sync_in_flight") or 0),
            "dead_letters": outbox.dead_count(),
            "oldest_pending": outbox.oldest_created(),
            "cursor": position.cursor,
            "version": position.version,
            "last_success": outbox.meta("last_success"),
            "last_error": outbox.meta("last_error"),
            "stalled_since": stalled,
            "last_sync_refusal": cache.state(SYNC_REFUSED),  # an offered version not adopted
            "warnings": stall
            + outbox.warnings(
                iso(SystemClock().now()),
                warn_pending=sync.warn_pending,
                warn_age_s=sync.warn_age_s,
                age_of=seconds_between,
            ),
        }
