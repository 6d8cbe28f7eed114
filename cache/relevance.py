"""Relevance of memory to the current turn (SPEC §5.2), pure and deterministic.

An item (a profile item's key and value, a daily summary's text) is scored against the
utterance three ways, strongest first:

- *named*: the item's value (or its key) occurs in the utterance as written — "거실 청정해줘"
  names `preferred_room = 거실`;
- *concept*: the utterance and the item share a concept of the lexicon: the shipped one (rooms,
  devices, music, times, …: the words of the catalogs' capabilities and of the robot's rooms),
  the rooms the device context knows (`current_room`, `rooms`) — "안방 가줘" is about a room, so
  `preferred_room` is about it too;
- *n-grams*: character bigrams shared by the utterance's words and the item's (Korean nouns are
  mostly two syllables, which SQLite's FTS5 `trigram` tokenizer cannot match at all: a query
  shorter than three characters finds nothing; bigrams of at most a few dozen short texts are
  cheaper than a round trip to an index).

Matched items rank by score, then the cloud's `relevance_score`, confidence, recency. Unmatched
items are *standing context*: at most `standing` of them go with a turn, taken in turns — a
window of `standing` slots on a ring of at least `2 * standing` slots (the unmatched items, then
empty slots when there are fewer), placed by the turn's key — so no item goes out with every
answer merely for being old and confident: however few they are, an unmatched item goes with
at most half of the turns (issue 30: with one or two items the ring used to be their own
number, and a lone `hobby` went out 20 turns of 20). Everything here is a function of the
view, the utterance, the device context and the turn's key: same inputs, same order.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from a2a_common.text import normal

_WORD = re.compile(r"[0-9A-Za-z\uac00-\ud7a3]+")

# concept → the words that name it (utterance side) and the key fragments that carry it
CONCEPTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "room": (
        ("방", "거실", "안방", "주방", "부엌", "서재", "현관", "침실", "작은방", "아이방", "room"),
        ("room", "place", "location"),
    ),
    "air": (("청정", "공기", "미세먼지", "환기", "purif", "air"), ("purif", "air", "clean")),
    "music": (("노래", "음악", "곡", "틀어", "song", "music"), ("song", "music", "artist")),
    "time": (("시에", "아침", "저녁", "일어나", "기상", "알람", "wake", "alarm"), ("time", "wake")),
    "hobby": (("취미", "주말", "등산", "운동", "hobby"), ("hobby", "sport", "weekend")),
    "food": (("밥", "음식", "먹", "요리", "food"), ("food", "meal", "dish")),
}
NAMED, CONCEPT, GRAM = 100, 10, 1


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def grams(text: str) -> frozenset[str]:
    """Character bigrams of each word (a one-character word is its own gram)."""
    out: set[str] = set()
    for word in words(text):
        out.update(word[i : i + 2] for i in range(max(1, len(word) - 1)))
    return frozenset(out)


@dataclass(frozen=True)
class Query:
    """The turn's side of the match, built once per turn."""

    text: str
    low: str
    grams: frozenset[str]
    concepts: frozenset[str]
    rooms: frozenset[str]

    @property
    def empty(self) -> bool:
        return not self.grams


def _rooms_of(context: Mapping[str, Any] | None) -> frozenset[str]:
    """The rooms the device context knows: `current_room` and a `rooms` list of strings."""
    if not isinstance(context, Mapping):
        return frozenset()
    found = [context.get("current_room")]
    rooms = context.get("rooms")
    if isinstance(rooms, list):
        found += rooms[:64]
    return frozenset(normal(r) for r in found if isinstance(r, str) and 0 < len(r) <= 40)


def concepts_in(text: str, rooms: Iterable[str] = ()) -> frozenset[str]:
    low = text.lower()
    found = {name for name, (said, _keys) in CONCEPTS.items() if any(w in low for w in said)}
    if any(room and room in text for room in rooms):
        found.add("room")
    return frozenset(found)


def query(utterance: str, device_context: Mapping[str, Any] | None = None) -> Query:
    text = normal(utterance) if isinstance(utterance, str) else ""  # SPEC §2.4 (console, CLI)
    rooms = _rooms_of(device_context)
    return Query(text, text.lower(), grams(text), concepts_in(text, rooms), rooms)


@dataclass(frozen=True)
class Side:
    """An item's own side of the match, worked out once per text (the same items are scored
    turn after turn): its key lower-cased, its concepts, its bigrams."""

    low_key: str
    concepts: frozenset[str]
    grams: frozenset[str]


@lru_cache(maxsize=8192)
def _side(key: str, value_text: str) -> Side:
    low = key.lower()
    keyed = {n for n, (_said, keys) in CONCEPTS.items() if any(k in low for k in keys)}
    return Side(
        low,
        frozenset(keyed | concepts_in(value_text)),
        grams(f"{key.replace('_', ' ')} {value_text}"),
    )


def score(q: Query, key: str, value_text: str) -> int:
    """How strongly the utterance names an item with this key and value text (0: not at all)."""
    if q.empty:
        return 0
    return _scored(q, key, value_text, _side(key, value_text))


def _scored(q: Query, key: str, value_text: str, side: Side) -> int:
    named = (bool(value_text) and value_text in q.text) or (len(key) >= 2 and side.low_key in q.low)
    concepts = side.concepts
    if q.rooms and "room" not in concepts and any(room in value_text for room in q.rooms):
        concepts = concepts | {"room"}
    shared = len(q.concepts & concepts) if q.concepts else 0
    return NAMED * named + CONCEPT * shared + GRAM * len(q.grams & side.grams)


class _Sides:
    """The item side of a sequence of items or summaries (`key`, value text, `Side`), and the
    items' order newest first: worked out once for the sequence a view holds, which is the
    same object turn after turn while the view is kept (cache/lasting.py)."""

    def __init__(self, entries: Sequence[Any], daily: bool) -> None:
        self.entries = entries
        self.keys = ["" if daily else e.key for e in entries]
        self.texts = [e.summary if daily else _value_text(e.value) for e in entries]
        self.sides = [_side(k, t) for k, t in zip(self.keys, self.texts, strict=True)]
        self.newest = (
            []
            if daily
            else sorted(range(len(entries)), key=lambda i: entries[i].updated, reverse=True)
        )

    def scores(self, q: Query) -> list[int]:
        if q.empty:
            return [0] * len(self.entries)
        return [
            _scored(q, k, t, side)
            for k, t, side in zip(self.keys, self.texts, self.sides, strict=True)
        ]


_last: dict[bool, _Sides] = {}  # daily or not -> the sides of the last sequence scored


def _sides_of(entries: Sequence[Any], daily: bool) -> _Sides:
    """Kept for the last tuple scored (immutable: the same object holds the same entries)."""
    if not isinstance(entries, tuple):
        return _Sides(entries, daily)
    kept = _last.get(daily)
    if kept is None or kept.entries is not entries:
        kept = _last[daily] = _Sides(entries, daily)
    return kept


def rotate(unmatched: Sequence[Any], standing: int, turn_key: int) -> list[Any]:
    """At most `standing` of the unmatched items, in turns: a window of `standing` slots on a
    ring of `max(len(unmatched), 2 * standing)` slots (empty ones after the items), starting at
    `turn_key` modulo its size — each item is in at most half of the windows."""
    if standing <= 0 or not unmatched:
        return []
    ring = max(len(unmatched), 2 * standing)
    start = turn_key % ring
    slots = ((start + i) % ring for i in range(standing))
    return [unmatched[slot] for slot in slots if slot < len(unmatched)]


def turn_key(turn: int, minute: int) -> int:
    """Where a turn's window of standing context starts: a fixed hash of the turn's ordinal
    (each recorded turn has its own, so turns within one minute differ) and its minute (so
    snapshots taken between turns move too). Deterministic: the same cache and clock, the
    same key."""
    return zlib.crc32(f"{turn}:{minute}".encode())


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return " ".join(_value_text(v) for v in value)
    if isinstance(value, dict):
        return " ".join(_value_text(v) for v in value.values())
    return "" if value is None else str(value)


def _ranked(items: Sequence[Any], scores: Sequence[int], newest: list[int]) -> list[int]:
    """Indices by score, then relevance, confidence, recency (`newest`: the indices newest
    first); stable over the view's own order (relevance, key, id) for what ties on all of
    them."""
    return sorted(
        newest,
        key=lambda i: (-scores[i], -items[i].relevance, -(items[i].confidence or 0.0)),
    )


def focus_items(items: Sequence[Any], q: Query, standing: int, turn: int) -> list[Any]:
    """Profile items for this turn: the matched ones ranked, then standing context in turns."""
    sides = _sides_of(items, daily=False)
    scores = sides.scores(q)
    ranked = _ranked(items, scores, sides.newest)
    matched = [items[i] for i in ranked if scores[i] > 0]
    unmatched = [items[i] for i in ranked if scores[i] == 0]
    return matched + rotate(unmatched, standing, turn)


def focus_daily(daily: Sequence[Any], q: Query, limit: int) -> list[Any]:
    """Daily summaries for this turn: those the utterance names first (by score, newest first
    among equals), then the newest, up to `limit`; `daily` comes newest first."""
    scores = _sides_of(daily, daily=True).scores(q)
    if not any(scores):
        return list(daily[:limit])
    order = sorted(range(len(daily)), key=lambda i: (-scores[i], i))
    return [daily[i] for i in order[:limit]]
