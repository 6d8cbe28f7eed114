"""No user words in a workflow's trace (SPEC §5.5): the copy of a turn's request that the trace
keeps has every string that holds a fragment of the turn's utterance replaced — any run of two
or more of its words (compared NFKC- and case-folded, whatever separates them in the copy, and
with anything run onto its ends: "암에 걸렸어서" quotes "암에 걸렸어"), not only the whole — and,
when a classifier is given, every string it finds a category in (a sensitive term the planner
wrote itself, or one word of the user's). The planner may echo the user (an extra field, a
note, a step's args); the device keeps the request for the operator, not the words.
Bounded: deeper than `MAX_DEPTH` levels a value is replaced whole (no recursion limit to hit).

The classifier is passed in (`classify`: text -> its categories), so this module needs nothing
of the cache (the packages are siblings); the TaskManager's wiring gives it the memory's.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from a2a_common.text import invisible

USER_WORDS = "[user words]"
MAX_DEPTH = 32
MIN_WORDS = 2  # a fragment is a run of at least this many of the utterance's words
MAX_PAIRS = 256  # an utterance longer than this many words is looked for by its first pairs

_WORD = re.compile(r"[^\W_]+")  # a run of letters and digits; all else separates
Classify = Callable[[str], Sequence[str]]


def fold(text: str) -> str:
    """NFKC, case-folded, the invisible characters the door drops (`a2a_common.text.invisible`:
    format characters and the other default-ignorable code points) dropped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(c for c in folded if not invisible(c))


def words_of(text: str) -> list[str]:
    return _WORD.findall(fold(text))


def fragments(words: str) -> re.Pattern[str] | None:
    """One expression finding any run of two consecutive words of `words` (every longer run
    holds one), whatever separates them; None when there are fewer than two words."""
    tokens = words_of(words)
    if len(tokens) < MIN_WORDS:
        return None
    pairs = {(a, b) for a, b in itertools.pairwise(tokens)}
    alternatives = sorted(
        (f"{re.escape(a)}[\\W_]*{re.escape(b)}" for a, b in pairs), key=lambda p: (-len(p), p)
    )[:MAX_PAIRS]
    return re.compile("|".join(alternatives))


KEEP_ITEMS = 64  # a kept copy of a refused request holds at most this many items per list
KEEP_CHARS = 1024  # and strings cut to this many characters


def bounded(value: Any, depth: int = 0) -> Any:
    """A copy of `value` small enough to keep whatever arrived: lists cut to `KEEP_ITEMS` (then
    one note of how many more), strings to `KEEP_CHARS`, nothing deeper than `MAX_DEPTH`. A
    refused request is kept for the operator, and a hostile one (10,000 steps) must cost the
    device no more to keep and redact than a normal one."""
    if isinstance(value, str):
        return value if len(value) <= KEEP_CHARS else value[:KEEP_CHARS] + "…"
    if depth >= MAX_DEPTH and isinstance(value, dict | list):
        return "[too deep]"
    if isinstance(value, dict):
        items = list(itertools.islice(value.items(), KEEP_ITEMS))
        kept = {k: bounded(v, depth + 1) for k, v in items}
        if len(value) > KEEP_ITEMS:
            kept["…"] = f"{len(value) - KEEP_ITEMS} more keys"
        return kept
    if isinstance(value, list):
        kept_list = [bounded(v, depth + 1) for v in value[:KEEP_ITEMS]]
        if len(value) > KEEP_ITEMS:
            kept_list.append(f"… {len(value) - KEEP_ITEMS} more")
        return kept_list
    return value


def without_words(
    value: Any, words: str, depth: int = 0, *, classify: Classify | None = None
) -> Any:
    """`value` with each string holding a fragment of `words` (or, with `classify`, anything
    it finds a category in) replaced by `[user words]`."""
    pattern = fragments(words)
    whole = " ".join(words_of(words))  # a one-word utterance: the word itself, as before
    whole = whole if len(whole) >= MIN_WORDS else ""
    if pattern is None and not whole and classify is None:
        return value

    def hidden(text: str) -> bool:
        folded = fold(text)
        if (pattern is not None and pattern.search(folded)) or (whole and whole in folded):
            return True
        return classify is not None and bool(classify(text))

    return _walk(value, hidden, depth)


def _walk(value: Any, hidden: Callable[[str], bool], depth: int) -> Any:
    if isinstance(value, str):
        return USER_WORDS if hidden(value) else value
    if depth >= MAX_DEPTH and isinstance(value, dict | list):
        return "[too deep]"
    if isinstance(value, dict):
        return {
            (USER_WORDS if hidden(str(k)) else k): _walk(v, hidden, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_walk(v, hidden, depth + 1) for v in value]
    return value
