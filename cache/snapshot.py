"""The memory snapshot of SPEC §5.2 (pure): same view and budget, byte-identical result.

Items are added in the order of keeping — sync, newest recent pairs, session summary, profile
items by relevance, weekly digest, daily summaries newest first — each only while the canonical
JSON still fits the budget. A text too long to fit is cut at a character boundary (so UTF-8 is
never split) rather than dropped, as long as some of it fits; the JSON structure itself is
never cut.

Canonical JSON is compositional, so sizes are kept as a running count: adding an element costs
its own canonical length plus a comma, a text costs its escaped length. Nothing is
re-serialized whole while building.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from a2a_common.jsonx import canonical
from cache.model import CacheView, PairView, ProfileView

MAX_DAILY = 7
SOURCE = "ondevice_cache"

Snapshot = dict[str, Any]


def size_of(snapshot: Snapshot) -> int:
    return len(canonical(snapshot))


# what canonical JSON escapes in a string (`ensure_ascii=False`): quote, backslash, controls
_ESCAPED = re.compile(r'["\\\x00-\x1f]')


def _text_len(text: str) -> int:
    """Bytes a string adds inside canonical JSON (escaped, without its quotes): its UTF-8
    bytes when nothing in it is escaped (nearly always), else measured."""
    if _ESCAPED.search(text) is None:
        return len(text.encode("utf-8"))
    return len(canonical(text)) - 2


Scalar = str | int | bool | None


@lru_cache(maxsize=4096)
def _scalar_item_cost(
    key: str, value: Scalar, category: str | None, confidence: float | None, _kinds: object
) -> int:
    return len(canonical(_profile_json(ProfileView(key, value, category, confidence))))


def _item_cost(item: ProfileView) -> int:
    """Canonical bytes of an item's entry. The same items go out turn after turn: those whose
    value is a string, an integer, a boolean or null are measured once. Equal keys must be the
    same JSON: the value's type is part of the key (1 and True are equal, and 1 is not
    `true`), and so is the confidence as Python writes it (-0.0 equals 0.0)."""
    value, confidence = item.value, item.confidence
    if value is None or isinstance(value, str | int | bool):
        kinds = (type(value), repr(confidence))
        return _scalar_item_cost(item.key, value, item.category, confidence, kinds)
    return len(canonical(_profile_json(item)))


def _cut(text: str, room: int) -> str:
    """The longest prefix (whole characters) whose escaped length fits `room` bytes."""
    if _text_len(text) <= room:
        return text
    lo, hi, best = 0, min(len(text), room), ""
    while lo <= hi:
        mid = (lo + hi) // 2
        if _text_len(text[:mid]) <= room:
            best, lo = text[:mid], mid + 1
        else:
            hi = mid - 1
    return best


class _Room:
    """What is left of the budget."""

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self, cost: int) -> bool:
        if cost > self.left:
            return False
        self.left -= cost
        return True

    def text(self, text: str) -> str:
        """As much of `text` as fits, taken from the room."""
        chosen = _cut(text, self.left)
        self.left -= _text_len(chosen)
        return chosen


def _skeleton(view: CacheView) -> Snapshot:
    return {
        "source": SOURCE,
        "short_term": {"recent_pairs": [], "session_summary": ""},
        "mid_term": {"daily_summaries": [], "weekly_digest": ""},
        "long_term": {"profile_items": []},
        "sync": {"cursor": view.sync.cursor, "version": view.sync.version},
    }


def _pair_json(pair: PairView, user: str, assistant: str) -> dict[str, Any]:
    out: dict[str, Any] = {"user": user, "assistant": assistant}
    if pair.route_family:
        out["route_family"] = pair.route_family
    return out


def _profile_json(item: ProfileView) -> dict[str, Any]:
    out: dict[str, Any] = {"key": item.key, "value": item.value}
    if item.category is not None:
        out["category"] = item.category
    if item.confidence is not None:
        out["confidence"] = item.confidence
    return out


def _append(
    out: list[dict[str, Any]], entry: dict[str, Any], room: _Room, fills: list[tuple[str, str]]
) -> bool:
    """Add `entry` (its text fields empty), then fill them in order, each cut to fit. An entry
    whose first text does not fit at all is not added."""
    cost = len(canonical(entry)) + (1 if out else 0)
    if not room.take(cost):
        return False
    for index, (name, text) in enumerate(fills):
        entry[name] = room.text(text)
        if index == 0 and text and not entry[name]:
            room.left += cost
            return False
    out.append(entry)
    return True


def build_snapshot(view: CacheView, budget: int, recent_pairs: int = 6) -> Snapshot:
    """The snapshot for one turn; `view` is already filtered for expiry (`read_view` takes the
    turn's `now`), so the builder needs no clock."""
    snapshot = _skeleton(view)
    room = _Room(budget - size_of(snapshot))
    if room.left < 0:
        return snapshot  # sync is always sent, even alone over a budget too small for it
    short, mid = snapshot["short_term"], snapshot["mid_term"]
    newest: list[dict[str, Any]] = []
    for pair in reversed(view.recent_pairs[-recent_pairs:] if recent_pairs else ()):
        fills = [("user", pair.user), ("assistant", pair.assistant)]
        if not _append(newest, _pair_json(pair, "", ""), room, fills):
            break
    short["recent_pairs"] = newest[::-1]
    short["session_summary"] = room.text(view.session_summary)
    items: list[dict[str, Any]] = snapshot["long_term"]["profile_items"]
    for item in view.profile_items:
        if room.take(_item_cost(item) + (1 if items else 0)):
            items.append(_profile_json(item))
    mid["weekly_digest"] = room.text(view.weekly_digest)
    for daily in view.daily_summaries[:MAX_DAILY]:
        entry = {"day": daily.day, "summary": ""}
        if not _append(mid["daily_summaries"], entry, room, [("summary", daily.summary)]):
            break
    return snapshot
