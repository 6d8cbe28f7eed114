"""A cache view focused on one turn (SPEC §5.2): the profile items and daily summaries the
utterance names first, standing context in turns (`cache.relevance`). Pure."""

from __future__ import annotations

from dataclasses import replace

from cache.model import CacheView
from cache.relevance import Query, focus_daily, focus_items
from cache.snapshot import MAX_DAILY

FOCUS_DAILY = 31  # daily summaries a focused view chooses its 7 from (a month, newest first)


def focused(view: CacheView, q: Query, *, standing: int, turn: int) -> CacheView:
    """`turn`: the key the standing context's rotation starts from (`relevance.turn_key`)."""
    return replace(
        view,
        profile_items=tuple(focus_items(view.profile_items, q, standing, turn)),
        daily_summaries=tuple(focus_daily(view.daily_summaries, q, MAX_DAILY)),
    )
