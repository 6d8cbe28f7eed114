"""No user words in a workflow's trace (SPEC §5.5): the copy of a turn's request that the trace
keeps has every string that contains the turn's utterance replaced. The planner may echo the
user (an extra field, a note); the device keeps the request for the operator, not the words.
Bounded: deeper than `MAX_DEPTH` levels a value is replaced whole (no recursion limit to hit)."""

from __future__ import annotations

from typing import Any

USER_WORDS = "[user words]"
MAX_DEPTH = 32
MIN_WORDS = 2  # an utterance shorter than this is too common a string to look for


def without_words(value: Any, words: str, depth: int = 0) -> Any:
    """`value` with each string containing `words` (compared case-insensitively, outer spaces
    ignored) replaced by `[user words]`; unchanged when `words` is too short to tell."""
    needle = words.strip().casefold()
    if len(needle) < MIN_WORDS:
        return value
    return _walk(value, needle, depth)


def _walk(value: Any, needle: str, depth: int) -> Any:
    if isinstance(value, str):
        return USER_WORDS if needle in value.casefold() else value
    if depth >= MAX_DEPTH and isinstance(value, dict | list):
        return "[too deep]"
    if isinstance(value, dict):
        return {
            (USER_WORDS if needle in str(k).casefold() else k): _walk(v, needle, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_walk(v, needle, depth + 1) for v in value]
    return value
