"""Text as people read it (SPEC §2.4): the one normaliser every text, profile key and value that
comes in passes through, whatever its source (a turn, a cloud update, a forget request, the CLI).

`normal` takes a string to Unicode NFC and removes the format characters (general category Cf:
zero-width space, zero-width (non-)joiners, word joiner, BOM, soft hyphen, bidi marks…) and the
other default-ignorable code points (combining grapheme joiner, variation selectors, Hangul
fillers, tags), so 안방
typed composed, decomposed (NFD, as some front-ends send it) or with a zero-width space inside is
one and the same text. The format characters go first, so a decomposed syllable a zero-width
space split still composes. It is idempotent: `normal(normal(t)) == normal(t)`.

`normal_value` does the same to every string of a JSON value (object keys included), leaving
numbers, booleans and null as they are; a value nested deeper than `jsonx.MAX_DEPTH` is refused
(`ValueError`, which a pydantic validator reports as a field error) rather than recursed into.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from a2a_common.jsonx import MAX_DEPTH

# Unicode's Default_Ignorable_Code_Point ranges that are not format characters (Cf): the
# combining grapheme joiner, variation selectors, Hangul fillers and the like. Invisible as
# format characters are, they split keys as format characters do (안͏방, 안방️), so they go too.
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2065, 0x2065),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0xE0000, 0xE0FFF),
)


def invisible(ch: str) -> bool:
    """A format character (Cf) or another default-ignorable code point."""
    if unicodedata.category(ch) == "Cf":
        return True
    point = ord(ch)
    return any(low <= point <= high for low, high in _IGNORABLE_RANGES)


def normal(text: str) -> str:
    """NFC with the invisible characters (format characters and the other default-ignorable
    code points) removed."""
    if text.isascii():  # no ASCII character is invisible or composes
        return text
    if any(invisible(ch) for ch in text):
        text = "".join(ch for ch in text if not invisible(ch))
    return unicodedata.normalize("NFC", text)


def normal_value(value: Any, depth: int = 0) -> Any:
    """`value` with every string in it (object keys too) `normal`: a JSON value in, one out."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} deep")
    if isinstance(value, str):
        return normal(value)
    if isinstance(value, list | tuple):
        return [normal_value(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {
            (normal(k) if isinstance(k, str) else k): normal_value(v, depth + 1)
            for k, v in value.items()
        }
    return value


def same_text(a: str, b: str) -> bool:
    """Whether two texts read the same (compared after `normal`)."""
    return normal(a) == normal(b)
