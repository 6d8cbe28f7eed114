"""What the snapshot reads, with bounded, indexed queries (never "load all, then trim").

Left out here, so the pure builder never sees them: pending pairs, anything whose `expire_at`
has passed, profile items that are not `confirmed`, and sensitive items of a category the user
has not consented to. Sensitivity is the stored flag or the category's name in the current
policy, compared lower-cased (rows written before names were normalised count too).
"""

from __future__ import annotations

import json
from datetime import datetime

import sqlite_utils

from a2a_common.clock import iso
from cache.model import CacheView, DailySummary, PairView, ProfileView, SyncPosition
from cache.privacy import SENSITIVE_DEFAULT
from cache.snapshot import MAX_DAILY

_LIVE = "(expire_at IS NULL OR expire_at > ?)"


def read_view(
    db: sqlite_utils.Database,
    *,
    session_id: str | None,
    now: datetime,
    recent_pairs: int,
    consented: frozenset[str],
    sensitive: frozenset[str] = frozenset(SENSITIVE_DEFAULT),
    max_profile_items: int = 64,
) -> CacheView:
    stamp = iso(now)
    pairs = db.execute(
        "SELECT user_text, assistant_text, route_family FROM pairs"
        f" WHERE status != 'pending' AND {_LIVE}"
        " ORDER BY created_at DESC, pair_id DESC LIMIT ?",
        [stamp, recent_pairs],
    ).fetchall()
    summary = None
    if session_id is not None:
        summary = db.execute(
            "SELECT summary FROM sessions WHERE session_id = ?", [session_id]
        ).fetchone()
    daily = db.execute(
        f"SELECT day, summary FROM daily_summaries WHERE {_LIVE} ORDER BY day DESC LIMIT ?",
        [stamp, MAX_DAILY],
    ).fetchall()
    digest = db.execute(
        f"SELECT digest FROM weekly_digests WHERE {_LIVE} ORDER BY week DESC LIMIT 1", [stamp]
    ).fetchone()
    name = "lower(coalesce(category, ''))"
    shown = f"(sensitive = 0 AND {name} NOT IN ({','.join('?' * len(sensitive))}))"
    if consented:
        shown = f"({shown} OR {name} IN ({','.join('?' * len(consented))}))"
    items = db.execute(
        "SELECT key, value, category, confidence, relevance_score FROM profile_items"
        f" WHERE status = 'confirmed' AND {_LIVE} AND {shown}"
        " ORDER BY relevance_score DESC, key, item_id LIMIT ?",
        [stamp, *sorted(sensitive), *sorted(consented), max_profile_items],
    ).fetchall()
    sync = db.execute("SELECT cursor, version FROM sync_position WHERE id = 1").fetchone()
    return CacheView(
        recent_pairs=tuple(PairView(u, a, r) for u, a, r in reversed(pairs)),
        session_summary=summary[0] if summary else "",
        daily_summaries=tuple(DailySummary(d, s) for d, s in daily),
        weekly_digest=digest[0] if digest else "",
        profile_items=tuple(
            ProfileView(k, json.loads(v), c, conf, rel) for k, v, c, conf, rel in items
        ),
        sync=SyncPosition(*sync) if sync else SyncPosition(),
    )
