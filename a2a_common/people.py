"""People in the household (SPEC §5.7): whose a turn and its memory are.

A person id names one member of the household as the front-end's voice recognition does; it is
taken as SPEC §2.4 takes every text (NFC, no format characters) and then must be 1-64
characters with no MQTT wildcard (`#`, `+`), no `/`, no whitespace or control character.
`household` is everyone's: the turns of a guest or an unsure voice, and what the device
observes itself.
"""

from __future__ import annotations

import re

HOUSEHOLD = "household"
PERSON_ID_MAX = 64
PERSON_ID_PATTERN = r"^[^#+/\s\x00-\x1f\x7f]{1,64}$"
_PERSON = re.compile(PERSON_ID_PATTERN)


def is_person_id(value: object) -> bool:
    """Whether `value` (already normal) is a well-formed person id."""
    return isinstance(value, str) and _PERSON.fullmatch(value) is not None


def person_of(speaker_id: str | None, confidence: float | None, min_confidence: float) -> str:
    """Whose turn it is: the speaker when recognised at or above `min_confidence`, else the
    household's."""
    if speaker_id is None or confidence is None or confidence < min_confidence:
        return HOUSEHOLD
    return speaker_id
