"""The memory snapshot of SPEC §5.2 (pure): same view and budget, byte-identical result.

Items are added in the order of keeping — sync, newest recent pairs, session summary, profile
items by relevance, weekly digest, daily summaries newest first — each only if the canonical
JSON still fits the budget. A text too long to fit is cut at a character boundary (so UTF-8
is never split) rather than dropped, as long as some of it fits; the JSON structure itself is
never cut.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from a2a_common.jsonx import canonical
from cache.model import CacheView, PairView, ProfileView

MAX_DAILY = 7
SOURCE = "ondevice_cache"

Snapshot = dict[str, Any]


def size_of(snapshot: Snapshot) -> int:
    return len(canonical(snapshot))


def _skeleton(view: CacheView) -> Snapshot:
    return {
        "source": SOURCE,
        "short_term": {"recent_pairs": [], "session_summary": ""},
        "mid_term": {"daily_summaries": [], "weekly_digest": ""},
        "long_term": {"profile_items": []},
        "sync": {"cursor": view.sync.cursor, "version": view.sync.version},
    }


def _fits(snapshot: Snapshot, budget: int) -> bool:
    return size_of(snapshot) <= budget


def _longest_prefix(text: str, fits: Callable[[str], bool]) -> str | None:
    """The longest prefix of `text` (whole characters) for which `fits` holds, or None."""
    if fits(text):
        return text
    lo, hi = 0, len(text) - 1
    best: str | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(text[:mid]):
            best = text[:mid]
            lo = mid + 1
        else:
            hi = mid - 1
    return best if best else None


def _try_text(snapshot: Snapshot, budget: int, put: Callable[[str], None], text: str) -> bool:
    """Set a text via `put`, cut to fit; on no fit at all, leave it empty and say False."""

    def fits(candidate: str) -> bool:
        put(candidate)
        return _fits(snapshot, budget)

    chosen = _longest_prefix(text, fits) if text else ""
    put(chosen or "")
    return chosen is not None


def _pair_json(pair: PairView, user: str, assistant: str) -> dict[str, Any]:
    out: dict[str, Any] = {"user": user, "assistant": assistant}
    if pair.route_family:
        out["route_family"] = pair.route_family
    return out


def _add_pairs(snapshot: Snapshot, view: CacheView, budget: int, limit: int) -> None:
    pairs: list[dict[str, Any]] = snapshot["short_term"]["recent_pairs"]
    for pair in reversed(view.recent_pairs[-limit:] if limit else ()):
        entry = _pair_json(pair, "", "")
        pairs.insert(0, entry)
        if not _fits(snapshot, budget):
            pairs.pop(0)
            return

        def put_user(text: str, entry: dict[str, Any] = entry) -> None:
            entry["user"] = text

        def put_assistant(text: str, entry: dict[str, Any] = entry) -> None:
            entry["assistant"] = text

        if not _try_text(snapshot, budget, put_user, pair.user):
            pairs.pop(0)
            return
        _try_text(snapshot, budget, put_assistant, pair.assistant)


def _profile_json(item: ProfileView) -> dict[str, Any]:
    out: dict[str, Any] = {"key": item.key, "value": item.value}
    if item.category is not None:
        out["category"] = item.category
    if item.confidence is not None:
        out["confidence"] = item.confidence
    return out


def _add_profile(snapshot: Snapshot, items: tuple[ProfileView, ...], budget: int) -> None:
    out: list[dict[str, Any]] = snapshot["long_term"]["profile_items"]
    for item in items:
        out.append(_profile_json(item))
        if not _fits(snapshot, budget):
            out.pop()


def _add_daily(snapshot: Snapshot, view: CacheView, budget: int) -> None:
    out: list[dict[str, Any]] = snapshot["mid_term"]["daily_summaries"]
    for daily in view.daily_summaries[:MAX_DAILY]:
        entry = {"day": daily.day, "summary": ""}
        out.append(entry)

        def put(text: str, entry: dict[str, Any] = entry) -> None:
            entry["summary"] = text

        if not _fits(snapshot, budget) or not _try_text(snapshot, budget, put, daily.summary):
            out.pop()
            return


def build_snapshot(view: CacheView, now: datetime, budget: int, recent_pairs: int = 6) -> Snapshot:
    """The snapshot for one turn; `view` is already filtered for expiry at `now`."""
    snapshot = _skeleton(view)
    if not _fits(snapshot, budget):
        return snapshot  # sync is always sent, even alone over a budget too small for it
    _add_pairs(snapshot, view, budget, recent_pairs)
    short = snapshot["short_term"]

    def put_summary(text: str) -> None:
        short["session_summary"] = text

    _try_text(snapshot, budget, put_summary, view.session_summary)
    _add_profile(snapshot, view.profile_items, budget)
    mid = snapshot["mid_term"]

    def put_digest(text: str) -> None:
        mid["weekly_digest"] = text

    _try_text(snapshot, budget, put_digest, view.weekly_digest)
    _add_daily(snapshot, view, budget)
    return snapshot
