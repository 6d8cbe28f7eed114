"""On-device intents for when the cloud is away (pure): the set is config data, not code."""

from __future__ import annotations

from collections.abc import Sequence

from edge.config.settings import OfflineIntent


def _squash(text: str) -> str:
    return "".join(text.split())


def match_intent(text: str, intents: Sequence[OfflineIntent]) -> OfflineIntent | None:
    """The first intent one of whose words appears in the utterance (spaces ignored)."""
    squashed = _squash(text)
    for intent in intents:
        if any(_squash(word) and _squash(word) in squashed for word in intent.words):
            return intent
    return None
